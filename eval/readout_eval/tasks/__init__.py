"""One task per output object (`Family.task` names it): gold fields, cases, metrics."""
from __future__ import annotations

from importlib import import_module

from readout_eval.tasks.base import Case, Measured, Task

_MODULES = ("single_label", "multilabel", "values", "entities", "answer_span", "relevance")
TASKS: dict[str, Task] = {t.name: t for t in (import_module(f"readout_eval.tasks.{m}").TASK
                                              for m in _MODULES)}


def task_of(family: object) -> Task:
    """The task that evaluates ``family``'s output object."""
    return TASKS[getattr(family, "task")]


__all__ = ["Case", "Measured", "TASKS", "Task", "task_of"]
