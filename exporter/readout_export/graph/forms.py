"""The record's ``vector_forms``: the Matryoshka widths and quantized precisions an embedding artifact
serves (`readout_sdk.vector_forms`), with int8/uint8 ranges fitted here, at build time, on the manifest's
calibration corpus through the eager graph (the reference every target is judged against).

The calibration texts are encoded under the role a stored corpus is encoded under: ``document`` where
the model declares it, else its default role, else none; the record says which.
"""
from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from readout_sdk.batching import Prepared, make_feed
from readout_sdk.roles import Role, apply_prompt, prompt_tokens
from readout_sdk.vector_forms import VectorForm, fit_ranges, to_record

from readout_export.errors import ManifestError
from readout_export.planning.forms import declared_forms
from readout_export.planning.plan import Plan

CALIBRATION_BATCH = 32
CALIBRATED = ("int8", "uint8")


def calibration_role(plan: Plan) -> str | None:
    """The role calibration texts are encoded under (what a stored corpus is: documents)."""
    return "document" if "document" in plan.prompts else plan.default_role


def vector_forms(plan: Plan, graph: Any, tok: Any, inputs: list[str], dim: int, normalized: bool,
                 score_type: str) -> dict[str, Any] | None:
    """The record's ``vector_forms`` section for ``plan`` (None when the manifest declares none)."""
    spec = plan.vectors
    if not spec:
        return None
    declared = declared_forms(plan, dim)
    calibrated = any(p in CALIBRATED for _, p in declared)
    vectors = _calibration_vectors(plan, graph, tok, inputs) if calibrated else None
    forms = [to_record(VectorForm(width=w, precision=p, float_score=score_type, renormalize=normalized,
                                  ranges=fit_ranges(vectors, w, normalized) if p in CALIBRATED else None))
             for w, p in declared]
    calibration = None
    if vectors is not None:
        digest = hashlib.sha256("\n".join(spec["texts"]).encode("utf-8")).hexdigest()
        calibration = {"texts": len(spec["texts"]), "texts_sha256": digest, "role": calibration_role(plan)}
    return {"forms": forms, "calibration": calibration}


def derived_forms(plan: Plan, dim: int, built: dict[str, Any] | None) -> dict[str, Any] | None:
    """The ``vector_forms`` a rebuild from ``plan`` would declare, with the ranges the build fitted
    (``built``: the artifact's section; reconciliation derives without running the model): a form the
    manifest declares and the artifact lacks has no ranges, so it shows as a difference."""
    if not plan.vectors:
        return None
    fitted = {(f["width"], f["precision"]): f for f in (built or {}).get("forms") or []}
    forms = [fitted.get((w, p)) or {"width": w, "precision": p, "renormalize": plan.normalize == "l2", "ranges": None}
             for w, p in declared_forms(plan, dim)]
    return {"forms": forms, "calibration": (built or {}).get("calibration")}


def _calibration_vectors(plan: Plan, graph: Any, tok: Any, inputs: list[str]) -> np.ndarray:
    """The calibration texts' full vectors from the eager graph, in batches, under the calibration role."""
    import torch

    name = calibration_role(plan)
    prompt = plan.prompts.get(name, "") if name else ""
    role = Role(name, prompt, prompt_tokens(tok.backend, prompt, tok.all_special_ids)) if name else None
    texts = plan.vectors["texts"]
    out = []
    for k in range(0, len(texts), CALIBRATION_BATCH):
        parts = [Prepared((tok.backend.encode(apply_prompt(role, t)),), False, role)
                 for t in texts[k:k + CALIBRATION_BATCH]]
        feed = make_feed(parts, tok.pad_id, inputs, False)
        with torch.no_grad():
            y = graph(**{n: torch.from_numpy(v) for n, v in feed.items()})
        out.append((y[0] if isinstance(y, tuple) else y).numpy())
    vectors = np.concatenate(out).astype(np.float32)
    bad = np.flatnonzero(~np.isfinite(vectors).all(axis=1))
    if bad.size:
        raise ManifestError("$.vectors.calibration", f"text {int(bad[0])} of the calibration corpus has no content "
                                                     "rows (empty?); remove it")
    return vectors

