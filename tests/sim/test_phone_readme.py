"""The worked example in sim/phone/README.md runs as written (the doc stays true)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import sim.phone.apps
from sim.phone import SimPhone
from sim.phone_api import DeviceInfo

README = Path(__file__).resolve().parents[2] / "sim" / "phone" / "README.md"


def test_readme_example_app_works(monkeypatch: pytest.MonkeyPatch) -> None:
    m = re.search(r"```python\n# sim/phone/apps/weather.py\n(.*?)```", README.read_text(), re.S)
    assert m, "the worked example is missing from the README"
    ns: dict[str, Any] = {}
    exec(compile(m.group(1), str(README), "exec"), ns)
    app = ns["APP"]
    monkeypatch.setattr(sim.phone.apps, "APPS", [*sim.phone.apps.APPS, app])
    p = SimPhone(DeviceInfo("readme"))
    p.launch(app.package)
    assert [e.text for e in p.find(kind="list_item")] == ["Mon", "Tue", "Wed", "Thu", "Fri"]
    p.tap_element(p.find(icon="search", kind="icon_button")[0])
    assert p.keyboard_visible()
    p.type_text("Paris")
    p.key(66)
    assert p.current_screen() == f"{app.package}/main"
    assert p.find("Paris", kind="title")
    assert p.crashes == []
