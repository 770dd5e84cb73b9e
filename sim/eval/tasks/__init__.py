"""The 33 Mobile-Eval tasks and the tier-4 ones (Mobile-Eval-E style), in the paper's row
order, and a lookup by id."""

from __future__ import annotations

from sim.eval.instructions import APP_ROWS
from sim.eval.task import Task
from sim.eval.tasks import everyday, long_tasks, media, multi_app, shopping

_ALL = [*shopping.TASKS, *media.TASKS, *everyday.TASKS, *multi_app.TASKS, *long_tasks.TASKS]
TASKS: list[type[Task]] = sorted(_ALL, key=lambda t: (t.tier == 4, APP_ROWS.index(t.app), t.tier))
BY_ID: dict[str, type[Task]] = {t.task_id(): t for t in TASKS}


def get_task(task_id: str) -> type[Task]:
    try:
        return BY_ID[task_id]
    except KeyError:
        raise KeyError(f"no Mobile-Eval task {task_id!r}; known: {', '.join(BY_ID)}") from None


def select(tiers: set[int] | None = None, apps: set[str] | None = None) -> list[type[Task]]:
    return [t for t in TASKS if (tiers is None or t.tier in tiers)
            and (apps is None or t.app in apps or t.task_id() in apps)]
