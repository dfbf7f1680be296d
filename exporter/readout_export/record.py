"""Assemble the `readout-abi/1` record for a plan: the meaning of every graph output."""
from __future__ import annotations

import hashlib
import platform
from pathlib import Path
from typing import Any

from readout_sdk.abi import ABI_VERSION, family_spec

from readout_export import __version__
from readout_export.resolve import Plan
from readout_export.tokenizer_io import TokenizerInfo

PAIR_ROLES = {"extractive_qa": ("question", "context"), "cross_encoder": ("query", "document"),
              "multiple_choice": ("question", "choice")}


def tag_scheme(labels: list[str]) -> str:
    """BIO/IOB2 when every label is O or B-/I-X; BIOES with E-/S-; otherwise per-token labels only."""
    prefixes = {lab.split("-", 1)[0] for lab in labels if lab != "O"}
    if all(lab == "O" or "-" in lab for lab in labels) and prefixes:
        if prefixes <= {"B", "I"}:
            return "BIO"
        if prefixes <= {"B", "I", "E", "S"}:
            return "BIOES"
    return "none"


def weights_digest(files: list[tuple[str, str]]) -> str:
    """One sha256 over (name, sha256) pairs of every weight file, in name order."""
    h = hashlib.sha256()
    for name, digest in sorted(files):
        h.update(f"{name}:{digest}\n".encode())
    return h.hexdigest()


def build_record(plan: Plan, tok: TokenizerInfo, *, width: int, out_dims: dict[str, int],
                 token_types: bool, architecture: str, head: str | None, weights_sha256: str,
                 tokenizer_sha256: str, source_tokenizer_sha256: str | None, versions: dict[str, str]) -> dict[str, Any]:
    """Return the record embedded in every graph and in readout.json."""
    spec = family_spec(plan.family)
    inputs = [{"name": "input_ids", "dtype": "int64", "axes": list(spec.input_axes)},
              {"name": "attention_mask", "dtype": "int64", "axes": list(spec.input_axes)}]
    if token_types:
        inputs.append({"name": "token_type_ids", "dtype": "int64", "axes": list(spec.input_axes)})
    outputs = []
    for o in spec.outputs:
        shape = [out_dims.get(a) for a in o.axes]
        outputs.append({"name": o.name, "dtype": o.dtype, "axes": list(o.axes), "shape": shape})
    roles = PAIR_ROLES.get(plan.family)
    record: dict[str, Any] = {
        "abi_version": ABI_VERSION,
        "family": plan.family,
        "name": plan.manifest.data.get("name") or Path(plan.manifest.data["model"]).name,
        "inputs": inputs,
        "outputs": outputs,
        "input": {
            "max_length": plan.max_length,
            "truncation": {"side": plan.truncation_side, "strategy": plan.truncation_strategy},
            "pair": {"first": roles[0], "second": roles[1]} if roles else None,
            "padding_sides": ["left", "right"],
            "pad_token_id": tok.pad_id,
            "special_token_ids": tok.special_ids,
            "all_special_ids": tok.all_special_ids,
            "token_type_ids": token_types,
            "tokenizer_file": "tokenizer.json",
            "prompts": plan.source.prompts,
            "long_inputs": plan.long_inputs,
        },
        "contextual_state": {
            "layer": -1,
            "width": width,
            "architecture": architecture,
            "model_type": plan.source.model_type,
            "positions": "rank_among_valid_rows",
            "dtype": "float32",
        },
        "readout": _readout(plan, head, tok),
        "output": _output(plan, out_dims),
        "provenance": {
            "weights_sha256": weights_sha256,
            "tokenizer_sha256": tokenizer_sha256,
            "source_tokenizer_sha256": source_tokenizer_sha256,
            "exporter": f"readout-export {__version__}",
            "torch": versions["torch"],
            "transformers": versions["transformers"],
            "onnx": versions["onnx"],
            "opset": plan.opset,
            "python": platform.python_version(),
        },
    }
    return record


def _readout(plan: Plan, head: str | None, tok: TokenizerInfo) -> dict[str, Any]:
    # the ids the tokenizer inserts: excluded from content rows, and how readers spot empty texts
    readout: dict[str, Any] = {"rows": plan.rows, "empty_rows": "nan", "padding_rows": "zero",
                               "content_excluded_ids": tok.inserted_ids}
    if plan.family in ("embedding", "sparse"):
        readout["pooling"] = list(plan.pooling or [])
    if plan.family in ("embedding", "late_interaction"):
        readout["projection"] = [{"in": d.in_features, "out": d.out_features, "bias": d.bias,
                                  "activation": d.activation} for d in plan.dense]
        readout["normalize"] = plan.normalize
        readout["normalize_stage"] = None if plan.normalize == "none" else (
            "after_projection" if plan.dense else "after_pooling")
    if plan.family == "sparse":
        readout["activation"] = "log1p_relu"
    if head is not None:
        readout["head"] = head
    return readout


def _output(plan: Plan, out_dims: dict[str, int]) -> dict[str, Any]:
    out: dict[str, Any] = {"score_type": plan.score_type, "labels": plan.labels}
    if plan.family == "multilabel_classification":
        out["thresholds"] = plan.thresholds
        out["decision"] = "sigmoid(logit) >= threshold, per label"
    elif plan.family in ("sequence_classification", "multiple_choice"):
        out["decision"] = "argmax; ties go to the lowest index"
    elif plan.family == "cross_encoder":
        out["decision"] = "sort by score, descending; ties keep input order"
    elif plan.family == "token_classification":
        out["tag_scheme"] = tag_scheme(plan.labels or [])
    elif plan.family == "extractive_qa":
        out["null_policy"] = plan.null_policy
        out["window"] = {"stride": plan.stride, "spans_cross_windows": False}
        out["span"] = "start <= end, context rows only"
    elif plan.family in ("embedding", "late_interaction"):
        out["dim"] = out_dims["dim"]
        out["normalized"] = plan.normalize == "l2"
    elif plan.family == "sparse":
        out["vocab"] = out_dims["vocab"]
    return out
