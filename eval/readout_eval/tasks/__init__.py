"""One task per output object (`Family.task` names it): gold fields, cases, metrics."""
from __future__ import annotations

from importlib import import_module

from readout_sdk.errors import WrongCall

from readout_eval.tasks.base import Case, Measured, Task

_MODULES = ("single_label", "multilabel", "values", "entities", "answer_span", "relevance")
TASKS: dict[str, Task] = {t.name: t for t in (import_module(f"readout_eval.tasks.{m}").TASK
                                              for m in _MODULES)}


def task_of(family: object) -> Task:
    """The task that evaluates ``family``'s output object; a family that names none (composed without an
    `Evaluation` part, `readout_sdk.families.parts`) is refused by name, not a KeyError."""
    name = getattr(family, "task", "")
    if name not in TASKS:
        raise WrongCall(f"family {getattr(family, 'name', family)} gives no evaluation task this release runs "
                        f"(its task: {name!r}; tasks: {', '.join(TASKS)})")
    return TASKS[name]


__all__ = ["Case", "Measured", "TASKS", "Task", "task_of"]
