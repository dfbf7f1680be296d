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
from typing import Any, Mapping

SCHEME = "readout-calibration/1"
# decision-layer keys of the record's ``output`` section that a calibration overlay may set
DECISION_KEYS = ("thresholds", "null_threshold", "abstention", "fitted")
OVERLAY_KEYS = ("calibration", "overlay_of")


def temperature(record: Mapping[str, Any]) -> float:
    """The fitted temperature the record's calibration layer states (1.0 when none)."""
    cal = record.get("calibration") or {}
    if cal.get("method") == "temperature":
        return float(cal["parameters"]["temperature"])
    return 1.0


def base_of(record: Mapping[str, Any]) -> dict[str, Any]:
    """The record without any overlay and without its identity: what the graphs' record and this one
    must share."""
    out = {k: copy.deepcopy(v) for k, v in record.items() if k not in OVERLAY_KEYS + ("identity",)}
    out["output"] = {k: v for k, v in out["output"].items() if k not in DECISION_KEYS}
    return out


def graph_record_matches(record: Mapping[str, Any], embedded: Mapping[str, Any]) -> bool:
    """Whether a graph whose embedded record is ``embedded`` belongs to an artifact whose record is
    ``record``: the same record, or an overlay of exactly that graph record (same release, same fields
    outside the calibration and decision keys)."""
    if embedded == record:
        return True
    parent = (record.get("overlay_of") or {}).get("release_id")
    graph_release = (embedded.get("identity") or {}).get("release_id")
    return parent is not None and parent == graph_release and base_of(embedded) == base_of(record)


def overlay(graph_record: Mapping[str, Any], calibration: Mapping[str, Any] | None,
            decision: Mapping[str, Any]) -> dict[str, Any]:
    """The record of a calibrated artifact: ``graph_record`` (the record its graphs embed) with the
    calibration layer ``calibration`` and the decision keys ``decision`` set, its identity recomputed."""
    from readout_sdk.identity import compute

    unknown = set(decision) - set(DECISION_KEYS)
    if unknown:
        raise ValueError(f"not decision keys a calibration may set: {sorted(unknown)}")
    ident = graph_record.get("identity")
    if not ident:
        raise ValueError("the graph record has no layered identity (built before readout-identity/1); rebuild it")
    out = {k: copy.deepcopy(v) for k, v in graph_record.items() if k != "identity"}
    out["output"] = {**out["output"], **copy.deepcopy(dict(decision))}
    out["calibration"] = copy.deepcopy(dict(calibration)) if calibration else None
    out["overlay_of"] = {"release_id": ident["release_id"]}
    out["identity"] = compute(out, ident["weights"])
    return out
