"""Which row fields a family's evaluation reads: what the split-role audit's content keys cover
(`readout_eval.data.row_key`). Here, beside the tasks, because it reads them (the tasks read rows through
`readout_eval.data`, so it cannot live there)."""
from __future__ import annotations

import functools
from typing import Any

from readout_eval.tasks import TASKS

# fields a task reads beyond its gold fields and the family's input fields (relevance rows are a query and
# documents, whatever the family's own request fields are)
TASK_READS = {"relevance": ("query", "documents", "document")}


def content_fields(family: Any = None) -> frozenset[str] | None:
    """The row fields ``family``'s evaluation reads: its input fields (where its task reads rows as input
    items), its task's gold fields and the task's other fields. ``None``: those of every registered family
    (a superset, for callers that do not know the family). A family whose task is unknown: None (every
    field the row has)."""
    if family is None:
        return _every_family()
    task = TASKS.get(getattr(family, "task", ""))
    if task is None:
        return None
    inputs = tuple(family.fields) if task.reads_items else ()
    return frozenset((*inputs, *task.gold_fields, *TASK_READS.get(task.name, ())))


@functools.lru_cache(maxsize=1)
def _every_family() -> frozenset[str]:
    from readout_sdk.families import REGISTRY

    return frozenset().union(*(content_fields(f) or () for f in REGISTRY.values()))
