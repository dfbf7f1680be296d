"""Calibration as a versioned layer over a built record (`readout-calibration/1`).

`readout-export calibrate` fits score calibration and decision parameters on a calibration split and
writes a *new* artifact whose graphs and tokenizer are the parent's, byte for byte. Its record is the
graph's record with an overlay:

- ``calibration`` (the identity's calibration layer): ``{"scheme", "method", "parameters", "data"}``, the
  score transform, today ``temperature`` (probabilities = softmax(logits / T)); ``None`` when only
  decision parameters were fitted, so calibrated scores keep their cache keys;
- decision keys in ``output`` (the decision layer): ``thresholds`` (multilabel, per label),
  ``null_threshold`` (QA: the null answer wins when its score exceeds the best span's by more than this),
  ``abstention`` (``{"min_score": x, ...}``: a top score under it is returned as an abstention) and
  ``fitted`` (how and on what data those were chosen);
- ``overlay_of``: the release id of the graph's own record, which every graph still embeds.

A graph's embedded record therefore differs from such a record exactly in those keys;
:func:`graph_record_matches` is the one rule that accepts that and nothing more.
"""
from __future__ import annotations

import copy
import math
from typing import Any, Mapping

from readout_sdk.errors import AbiError, SdkError

SCHEME = "readout-calibration/1"
# decision-layer keys of the record's ``output`` section that a calibration overlay may set
DECISION_KEYS = ("thresholds", "null_threshold", "abstention", "fitted")
OVERLAY_KEYS = ("calibration", "overlay_of")


MAX_TEMPERATURE = 1000.0


class CalibrationError(SdkError, ValueError):
    """A calibration or decision parameter this SDK would not execute as stated."""


def temperature(record: Mapping[str, Any]) -> float:
    """The fitted temperature the record's calibration layer states (1.0 when none)."""
    cal = record.get("calibration") or {}
    if cal.get("method") == "temperature":
        return float(cal["parameters"]["temperature"])
    return 1.0


def check(record: Mapping[str, Any]) -> None:
    """Refuse calibration and decision parameters that would not mean what they say: a temperature that is
    not a finite number in (0, MAX_TEMPERATURE] (a negative one would turn argmax into argmin), or a
    non-finite threshold, margin or abstention score."""
    cal = record.get("calibration")
    if cal is not None:
        if not isinstance(cal, Mapping) or cal.get("method") != "temperature":
            raise CalibrationError("$.calibration: this SDK applies method 'temperature' only")
        t = (cal.get("parameters") or {}).get("temperature")
        if not _finite(t) or not 0 < t <= MAX_TEMPERATURE:
            raise CalibrationError(f"$.calibration.parameters.temperature: expected a number in (0, "
                                   f"{MAX_TEMPERATURE:g}], got {t!r}")
    out = record.get("output") or {}
    values = [("null_threshold", out.get("null_threshold"))]
    values += [(f"thresholds[{k}]", v) for k, v in enumerate(out.get("thresholds") or [])]
    if out.get("abstention") is not None:
        values.append(("abstention.min_score", (out["abstention"] or {}).get("min_score")))
    for name, v in values:
        if v is not None and not _finite(v):
            raise CalibrationError(f"$.output.{name}: expected a finite number, got {v!r}")


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def graph_record_matches(record: Mapping[str, Any], embedded: Mapping[str, Any]) -> bool:
    """Whether a graph whose embedded record is ``embedded`` belongs to an artifact whose record is
    ``record``: the same record, or exactly that graph record with this record's overlay applied (so every
    field and digest outside the calibration and decision keys, identity weights included, is the graph's)."""
    if embedded == record:
        return True
    if not record.get("overlay_of") or embedded.get("overlay_of"):
        return False
    try:
        rebuilt = overlay(embedded, record.get("calibration"),
                          {k: record["output"][k] for k in DECISION_KEYS if k in record["output"]})
    except (ValueError, KeyError, TypeError):
        return False
    return rebuilt == record


def overlay(graph_record: Mapping[str, Any], calibration: Mapping[str, Any] | None,
            decision: Mapping[str, Any]) -> dict[str, Any]:
    """The record of a calibrated artifact: ``graph_record`` (the record its graphs embed) with the
    calibration layer ``calibration`` and the decision keys ``decision`` set, its identity recomputed."""
    from readout_sdk.release.identity import compute

    unknown = set(decision) - set(DECISION_KEYS)
    if unknown:
        raise CalibrationError(f"not decision keys a calibration may set: {sorted(unknown)}")
    ident = graph_record.get("identity")
    if not ident:
        raise AbiError("the graph record has no layered identity (built before readout-identity/1); rebuild it")
    out = {k: copy.deepcopy(v) for k, v in graph_record.items() if k != "identity"}
    out["output"] = {**out["output"], **copy.deepcopy(dict(decision))}
    out["calibration"] = copy.deepcopy(dict(calibration)) if calibration else None
    out["overlay_of"] = {"release_id": ident["release_id"]}
    out["identity"] = compute(out, ident["weights"])
    return out
