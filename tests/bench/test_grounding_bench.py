"""bench/grounding.py's statistics."""

from __future__ import annotations

import pytest

from bench.grounding import sign_test_p


def test_the_sign_test() -> None:
    assert sign_test_p(3, 7) == pytest.approx(0.34375) == sign_test_p(7, 3)
    assert sign_test_p(0, 10) == pytest.approx(2 / 1024)
    assert sign_test_p(5, 5) == 1.0 and sign_test_p(0, 0) == 1.0
