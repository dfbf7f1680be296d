"""The vector forms a manifest declares (``$.vectors``), checked against the model's dimension.

Planning reads this to refuse a bad declaration before anything is built; the graph's
`readout_export.graph.forms` fits the declared forms' ranges at build.
"""
from __future__ import annotations

from readout_export.errors import ManifestError
from readout_export.planning.plan import Plan


def declared_forms(plan: Plan, dim: int) -> list[tuple[int, str]]:
    """(width, precision) of every form the manifest declares for a ``dim``-wide vector, in record order:
    widest first, float32 first at each width, the full float32 vector itself left out."""
    spec = plan.vectors or {}
    too_wide = [w for w in spec.get("widths", []) if w >= dim]
    if too_wide:
        raise ManifestError("$.vectors.widths", f"{too_wide} must be below the model's dimension {dim} (the full "
                                                "vector is always served)")
    precisions = ["float32", *(p for p in spec.get("precisions", []) if p != "float32")]
    return [(w, p) for w in [dim, *spec.get("widths", [])] for p in precisions if (w, p) != (dim, "float32")]
