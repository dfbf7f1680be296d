"""A request's ``truncation_direction`` (text-embeddings-inference's field): which end of a too-long input is cut.

TEI spells it ``"Left"`` / ``"Right"``; huggingface_hub's ``InferenceClient.feature_extraction`` sends
``"left"`` / ``"right"``: both are read. Anything else (``"Sideways"``, ``123``) is a 422 naming the field,
never silently the default. The side is honoured by the SDK's prepare step (`Engine.prepare`'s
``truncation_side``), so a left cut keeps the end of the text exactly as ``Engine.prepare(..., "left")`` does.
"""
from __future__ import annotations

from typing import Any

from readout_sdk.serving.http.body import kind
from readout_sdk.serving.http.problems import Problem

FIELD = "truncation_direction"
SIDES = {"Left": "left", "Right": "right", "left": "left", "right": "right"}


def truncation_side(doc: dict[str, Any]) -> str | None:
    """The SDK's ``truncation_side`` for the request (None: absent or null, the artifact's own side)."""
    value = doc.get(FIELD)
    if value is None:
        return None
    if not isinstance(value, str) or value not in SIDES:
        shown = repr(value) if isinstance(value, str) else kind(value)
        raise Problem("validation", f"$.{FIELD}: expected \"Left\" or \"Right\", got {shown}", f"$.{FIELD}")
    return SIDES[value]
