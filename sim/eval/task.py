"""The task base class: one Mobile-Eval instruction, checked on app state.

Modelled on android_world's TaskEval: a task instance is made for one seed
(``Task(seed)``, parameters drawn deterministically from it), ``setup(phone)`` seeds the
apps' state, and ``is_successful(phone)`` reads the state back. Checks read app state
through the phone's test API only, never the screen.

Each task also carries an ordered list of ``Milestone``s. A milestone is a predicate on
state plus its slice of the reference solution; the reference solution is the slices
concatenated, written in the agent's operation language (text and icon descriptions,
never coordinates). Its length is the task's human step count (``Stop`` not included).
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from protocol.operations import Operation
from sim.eval.instructions import INSTRUCTIONS, LONG_INSTRUCTIONS, instruction, long_instruction

if TYPE_CHECKING:
    from sim.phone import SimPhone


@dataclass(frozen=True)
class Milestone:
    """A state the task passes through, and the reference steps that get it there."""

    name: str
    check: Callable[[SimPhone], bool]
    steps: tuple[Operation, ...]

    def __post_init__(self) -> None:
        if not self.steps:
            raise ValueError(f"milestone {self.name!r} has no reference steps")


class Task(ABC):
    """One Mobile-Eval task for one seed. Subclasses set ``app`` and ``tier``."""

    app: ClassVar[str]  # the row in the paper's table ("Multi-App" for the cross-app row)
    tier: ClassVar[int]  # 1 simple, 2 added requirements, 3 abstract, 4 Mobile-Eval-E style
    name: ClassVar[str] = ""  # tier 4: several tasks per row, told apart by name
    max_steps: ClassVar[int] = 0  # 0: three times the reference length plus 5

    def __init__(self, seed: int) -> None:
        if not isinstance(seed, int) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        self.seed = seed
        self.params: dict[str, str] = self.make_params(seed)

    @classmethod
    def task_id(cls) -> str:
        return f"{slug(cls.app)}-{cls.tier}" + (f"-{cls.name}" if cls.name else "")

    @property
    def instruction(self) -> str:
        if self.name:
            return long_instruction(self.name, **self.params)
        return instruction(self.app, self.tier, **self.params)

    def make_params(self, seed: int) -> dict[str, str]:
        """Parameters drawn from the seed (an e-mail address, a date...). None by default."""
        return {}

    @abstractmethod
    def setup(self, phone: SimPhone) -> None:
        """Seed the apps' state for this task and go to the home screen."""

    @abstractmethod
    def is_successful(self, phone: SimPhone) -> bool:
        """Whether the instruction is done, judged on app state."""

    @abstractmethod
    def milestones(self) -> Sequence[Milestone]:
        """Ordered; the last one should hold exactly when ``is_successful`` does."""

    @property
    def reference(self) -> list[Operation]:
        return [op for m in self.milestones() for op in m.steps]

    @property
    def step_budget(self) -> int:
        return self.max_steps or 3 * len(self.reference) + 5

    def milestone_flags(self, phone: SimPhone) -> tuple[bool, ...]:
        return tuple(bool(m.check(phone)) for m in self.milestones())

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        app, tier = getattr(cls, "app", None), getattr(cls, "tier", None)
        name = getattr(cls, "name", "")
        if name and name not in LONG_INSTRUCTIONS:
            raise TypeError(f"{cls.__name__}: no tier-4 instruction named {name!r}")
        if app is not None and tier is not None and not name and (app, tier) not in INSTRUCTIONS:
            raise TypeError(f"{cls.__name__}: no Mobile-Eval instruction for {app!r} tier {tier}")


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def norm_text(text: str) -> str:
    """Lower case, punctuation dropped, spaces collapsed: for lenient content checks."""
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower()).split())
