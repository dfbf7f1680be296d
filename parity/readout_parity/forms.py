"""Parity of the declared vector forms (`readout_sdk.vector_forms`): what each width and precision costs
in retrieval against the full float32 vector, on the parity corpus, gated on the manifest's
``vectors.min`` budgets (no budget: NOT_EVALUATED, never a pass).

The full vectors are the reference's (eager PyTorch from the exporter, else the onnx-fp32 graph). Each
declared role is measured apart: a query vector is never a document's neighbour in a stored index.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from readout_parity.checks import Check, decide, not_evaluated
from readout_parity.retrieval_cost import form_cost

REFERENCE_PROVIDER = "reference"  # the checks' provider column: costs are measured on the reference's vectors


def form_checks(forms: dict[str, Any], vectors: Sequence[np.ndarray], roles: Sequence[str | None],
                budgets: dict[str, float], reference: str) -> tuple[list[Check], list[dict[str, Any]]]:
    """Checks and measurements of every form: ``vectors`` are the reference's per item, ``roles`` each
    item's role; ``budgets`` the minimum of each metric (`retrieval_cost`'s names)."""
    full = np.stack([np.asarray(v, np.float32) for v in vectors])
    blocks = {r: np.flatnonzero(np.array([x == r for x in roles])) for r in dict.fromkeys(roles)}
    checks: list[Check] = []
    measurements: list[dict[str, Any]] = []
    for name, form in forms.items():
        worst: dict[str, tuple[float, str]] = {}
        for role, at in blocks.items():
            where = f"role {role}" if role is not None else "all items"
            for metric, value in form_cost(full[at], form).items():
                if metric not in worst or value < worst[metric][0]:
                    worst[metric] = (value, where)
        target = f"form {name}"
        for metric, (value, where) in sorted(worst.items()):
            if metric in budgets:
                checks.append(decide(target, REFERENCE_PROVIDER, metric, value, {"min": budgets[metric]}, reference,
                                     where))
            else:
                measurements.append({"target": target, "provider": REFERENCE_PROVIDER, "metric": metric,
                                     "measured": value, "worst_case": where, "gated": False})
        if not set(worst) & set(budgets):
            checks.append(not_evaluated(target, REFERENCE_PROVIDER, "no budget: declare vectors.min in the manifest "
                                        f"(measured: {', '.join(f'{m} {v:.3f}' for m, (v, _) in sorted(worst.items()))})"))
    return checks, measurements
