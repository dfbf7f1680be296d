"""Combine a manifest with what the model directory declares into one resolved build plan.

Rules: a value the model directory declares may be restated in the manifest only if equal;
derived values (widths, class counts) are never taken from the manifest; anything ambiguous is
refused rather than guessed.
"""
from __future__ import annotations

import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from readout_sdk.abi import POOLING_MODES, family_spec
from readout_sdk.artifact import TENSORRT_SOURCE, default_runtime
from readout_sdk.artifact import target_name as _name

from readout_export.errors import ManifestError
from readout_export.manifest import Manifest
from readout_export.source import DenseSpec, ModelSource, read_source

# Models whose position table is offset by padding_idx + 1 (positions start after the pad id).
OFFSET_POSITIONS = {"roberta", "xlm-roberta", "xlm-roberta-xl", "camembert", "mpnet", "data2vec-text", "longformer"}
PROBLEM_TYPES = {"sequence_classification": "single_label_classification",
                 "multilabel_classification": "multi_label_classification", "regression": "regression"}
# (format, precision, runtime). bf16 is the fp32 graph run with OpenVINO's bf16 inference precision (ONNX
# Runtime has no bf16 CPU kernels); int8 has one recipe per runtime (see quantize.py).
SUPPORTED_TARGETS = {("onnx", "fp32", "onnxruntime"), ("onnx", "int8", "onnxruntime"), ("onnx", "int8", "openvino"),
                     ("onnx", "bf16", "openvino"), ("onnx", "fp16", "onnxruntime"),
                     ("tensorrt", "fp32", "tensorrt"), ("tensorrt", "fp16", "tensorrt"), ("tensorrt", "bf16", "tensorrt"),
                     ("tensorrt", "int8", "tensorrt")}
GENERIC_LABEL = re.compile(r"^LABEL_\d+$")


@dataclass
class Plan:
    """Everything a build needs, resolved and checked."""

    manifest: Manifest
    source: ModelSource
    family: str
    max_length: int
    truncation_side: str
    truncation_strategy: str
    pooling: list[str] | None = None
    rows: str = "attention"
    normalize: str = "none"
    dense: list[DenseSpec] = field(default_factory=list)
    labels: list[str] | None = None
    thresholds: list[float] | None = None
    score_type: str | None = None
    null_policy: str | None = None
    stride: int | None = None
    targets: list[dict[str, str]] = field(default_factory=list)
    opset: int = 18
    notes: list[str] = field(default_factory=list)
    tokenizer: Any = None  # TokenizerInfo, loaded once the truncation policy is known
    long_inputs: dict[str, Any] = field(default_factory=lambda: {"policy": "truncate"})

    @property
    def output_dir(self) -> Path:
        return self.manifest.output_dir


def _agree(jpath: str, declared: Any, stated: Any, where: str) -> Any:
    """Return the declared value; the manifest may restate it only if equal."""
    if stated is not None and declared is not None and stated != declared:
        raise ManifestError(jpath, f"manifest says {stated!r} but {where} declares {declared!r}")
    return declared if declared is not None else stated


def position_limit(source: ModelSource) -> int | None:
    """Longest sequence the model's position table admits (None: the config states no table)."""
    table = source.config.get("max_position_embeddings")
    if table is None:
        return None
    if source.model_type in OFFSET_POSITIONS:
        return int(table) - int(source.config.get("pad_token_id") or 1) - 1
    return int(table)


def resolve(manifest: Manifest) -> Plan:
    """Check ``manifest`` against its model directory and return the build plan."""
    data = manifest.data
    family = manifest.family
    spec = family_spec(family)
    model_dir = manifest.model_dir
    out = manifest.output_dir
    if out == model_dir or model_dir in out.parents:
        raise ManifestError("$.output_dir", f"{out} is inside the model directory {model_dir}; "
                                            "choose a directory outside it")
    source = read_source(model_dir)
    plan = Plan(manifest, source, family, 0, "right", "longest_first" if spec.pair_input else "longest_first")
    if family == "extractive_qa":
        plan.truncation_strategy = "only_second"
    plan.truncation_side = _agree("$.truncation.side", source.truncation_side, data.get("truncation", {}).get("side"),
                                  "tokenizer_config.json (truncation_side)") or "right"
    _resolve_max_length(plan, data.get("max_length"))
    _resolve_targets(plan, data.get("targets"))
    plan.opset = int(data.get("opset", 18))
    if family == "embedding":
        _resolve_embedding(plan, manifest)
    elif family == "late_interaction":
        _resolve_late(plan, manifest)
    elif family == "sparse":
        _resolve_sparse(plan, manifest)
    elif source.st_modules and source.st_modules != ["Transformer"]:
        raise ManifestError("$.model", f"{family} exports a transformers head, but modules.json adds "
                                       f"{source.st_modules[1:]} on top; export it as an embedding instead")
    if spec.label_axis:
        _resolve_labels(plan, data)
    if family in PROBLEM_TYPES:
        declared = source.config.get("problem_type")
        if declared is not None and declared != PROBLEM_TYPES[family]:
            raise ManifestError("$.family", f"family {family} needs problem_type {PROBLEM_TYPES[family]!r}, "
                                            f"but config.json declares {declared!r}")
    if family == "multilabel_classification":
        _resolve_thresholds(plan, data.get("thresholds", 0.5))
    if family == "cross_encoder":
        plan.score_type = _agree("$.score_type", source.cross_activation, data.get("score_type"),
                                 "config.json (sentence_transformers.activation_fn)")
        if plan.score_type is None:
            raise ManifestError("$.score_type", "cross_encoder needs its score type (logit, sigmoid or softmax): "
                                                "the model directory does not declare one, so state it")
        if plan.score_type not in spec.score_types:
            raise ManifestError("$.score_type", f"expected one of {list(spec.score_types)}, got {plan.score_type!r}")
        if plan.score_type == "softmax" and len(plan.labels or []) < 2:
            raise ManifestError("$.score_type", "softmax needs at least 2 classes; this head has 1")
    elif family != "embedding":
        plan.score_type = spec.score_types[0]
    _resolve_tokenizer(plan)
    if family == "extractive_qa":
        plan.null_policy = data.get("null_policy", "none")
        plan.stride = int(data.get("stride", min(128, plan.max_length // 4)))
        if plan.stride >= plan.max_length // 2:
            raise ManifestError("$.stride", f"expected less than half of max_length ({plan.max_length // 2}), "
                                            f"got {plan.stride}")
        plan.long_inputs = {"policy": "windows", "stride": plan.stride, "aggregation": "best_span"}
    if "long_inputs" in data:
        _resolve_long_inputs(plan, data["long_inputs"])
    return plan


AGGREGATIONS = {"embedding": ("mean",), "regression": ("mean",),
                "sequence_classification": ("mean_logits", "mean_probabilities"),
                "multilabel_classification": ("mean_logits", "mean_probabilities")}


def _resolve_long_inputs(plan: Plan, spec: dict[str, Any]) -> None:
    if spec["policy"] == "truncate":
        extra = sorted(set(spec) - {"policy"})
        if extra:
            raise ManifestError(f"$.long_inputs.{extra[0]}", "applies only to policy 'windows'")
        plan.long_inputs = {"policy": "truncate"}
        return
    allowed = AGGREGATIONS[plan.family]
    if "aggregation" not in spec:
        raise ManifestError("$.long_inputs.aggregation", f"windows need a declared aggregation: one of {list(allowed)}")
    if spec["aggregation"] not in allowed:
        raise ManifestError("$.long_inputs.aggregation", f"expected one of {list(allowed)} for {plan.family}, "
                                                         f"got {spec['aggregation']!r}")
    stride = int(spec.get("stride", plan.max_length // 4))
    if stride >= plan.max_length // 2:
        raise ManifestError("$.long_inputs.stride", f"expected less than half of max_length "
                                                    f"({plan.max_length // 2}), got {stride}")
    plan.long_inputs = {"policy": "windows", "stride": stride, "aggregation": spec["aggregation"]}


def _resolve_tokenizer(plan: Plan) -> None:
    from readout_export.tokenizer_io import load_tokenizer

    plan.tokenizer = load_tokenizer(plan.source.tokenizer_dir, plan.max_length, plan.truncation_side,
                                    plan.truncation_strategy)
    if plan.pooling and "cls" in plan.pooling and not plan.tokenizer.leading_special:
        raise ManifestError("$.readout.pooling", "'cls' reads the special token the tokenizer puts first, but this "
                                                 "tokenizer puts none there; use 'first_valid' or 'last_token'")


def _resolve_max_length(plan: Plan, stated: int | None) -> None:
    source = plan.source
    value = _agree("$.max_length", source.st_max_length, stated,
                   "the sentence-transformers config (max_seq_length)")
    limit = position_limit(source)
    if value is None:
        value = min(x for x in (limit, source.tokenizer_max_length, 512) if x)
        plan.notes.append(f"max_length not stated; using {value}")
    if limit is not None and value > limit:
        raise ManifestError("$.max_length", f"{value} exceeds the model's position table ({limit} positions)")
    if source.tokenizer_max_length is not None and value > source.tokenizer_max_length:
        raise ManifestError("$.max_length", f"{value} exceeds the tokenizer's model_max_length "
                                            f"({source.tokenizer_max_length})")
    plan.max_length = int(value)


def _resolve_targets(plan: Plan, targets: list[dict[str, str]] | None) -> None:
    targets = targets or [{"format": "onnx", "precision": "fp32"}]
    seen = set()
    resolved = []
    for i, t in enumerate(targets):
        t = dict(t)
        t.setdefault("runtime", default_runtime(t["format"], t["precision"]))
        key = (t["format"], t["precision"], t["runtime"])
        name = target_name(t)
        if key in seen:
            raise ManifestError(f"$.targets[{i}]", f"repeats target {name}")
        seen.add(key)
        if key not in SUPPORTED_TARGETS:
            raise ManifestError(f"$.targets[{i}]", f"{name} is not built by this release (supported: "
                                                   f"{', '.join(sorted(target_name(dict(zip(('format', 'precision', 'runtime'), k))) for k in SUPPORTED_TARGETS))})")
        if "isa" in t and (t["precision"] != "int8" or t["format"] != "onnx"):
            raise ManifestError(f"$.targets[{i}].isa", "isa applies to onnx int8 targets only")
        if "profile" in t and t["format"] != "tensorrt":
            raise ManifestError(f"$.targets[{i}].profile", "profile applies to tensorrt targets only")
        if t["format"] == "tensorrt":
            from readout_sdk.profiles import derive_profile

            try:
                t["profile"] = derive_profile(t.get("profile"), plan.max_length, plan.family).to_json()
            except ValueError as e:
                raise ManifestError(f"$.targets[{i}].{str(e).split(':')[0]}", str(e).split(": ", 1)[1]) from None
        if t["precision"] == "int8" and t["format"] == "onnx":
            t.setdefault("isa", "avx512-vnni")
            if t["runtime"] == "openvino" and t["isa"] == "arm64":
                raise ManifestError(f"$.targets[{i}].isa", "arm64 (Jetson's CPU) takes the onnxruntime int8 recipe; "
                                                           "drop runtime or set it to onnxruntime")
        resolved.append(t)
    # each engine's ONNX source is built too, and the fp32 graph (the torch-free parity reference on the device)
    for t in [t for t in resolved if t["format"] == "tensorrt"]:
        for precision, runtime in (TENSORRT_SOURCE[t["precision"]], ("fp32", "onnxruntime")):
            if not any(s["format"] == "onnx" and (s["precision"], s["runtime"]) == (precision, runtime)
                       for s in resolved):
                source = {"format": "onnx", "precision": precision, "runtime": runtime}
                if precision == "int8":
                    source["isa"] = "avx512-vnni"
                resolved.append(source)
    for i, t in enumerate(resolved):
        if t["runtime"] == "openvino" and t["precision"] == "int8" and importlib.util.find_spec("nncf") is None:
            where = f"$.targets[{i}]" if i < len(targets) else "$.targets"
            raise ManifestError(where, "onnx-int8-openvino (also the source of tensorrt-int8) is calibrated with "
                                       "NNCF, which is not installed: pip install 'readout-export[openvino]'")
    plan.targets = resolved


def target_name(t: dict[str, str]) -> str:
    """The artifact's name for a manifest target (the SDK's rule)."""
    return _name(t["format"], t["precision"], t.get("runtime"))


def _pooling_list(stated: Any) -> list[str] | None:
    if stated is None:
        return None
    return [stated] if isinstance(stated, str) else list(stated)


def _resolve_embedding(plan: Plan, manifest: Manifest) -> None:
    source = plan.source
    st = bool(source.st_modules)
    plan.pooling = _agree("$.readout.pooling", source.st_pooling, _pooling_list(manifest.readout("pooling")),
                          "1_Pooling/config.json")
    if not plan.pooling:
        raise ManifestError("$.readout.pooling", f"the model directory declares no pooling; state one of "
                                                 f"{list(POOLING_MODES)}")
    if st and not source.st_include_prompt:
        raise ManifestError("$.model", "1_Pooling excludes prompt rows (include_prompt: false); "
                                       "prompt-aware pooling is not in readout-abi/1")
    # sentence-transformers pools over every attention row, special tokens included.
    plan.rows = _agree("$.readout.rows", "attention" if source.st_pooling else None, manifest.readout("rows"),
                       "the sentence-transformers Pooling module") or "attention"
    plan.normalize = _agree("$.readout.normalize", ("l2" if source.st_normalize else "none") if st else None,
                            manifest.readout("normalize"), "modules.json") or "none"
    plan.dense = list(source.dense)
    _check_dense_chain(plan, plan.pooling)
    declared_sim = source.similarity
    plan.score_type = _agree("$.score_type", declared_sim, manifest.data.get("score_type"),
                             "config_sentence_transformers.json (similarity_fn_name)") or "cosine"
    if plan.score_type not in ("cosine", "dot", "euclidean"):
        raise ManifestError("$.score_type", f"expected one of ['cosine', 'dot', 'euclidean'], got {plan.score_type!r}")


def _check_dense_chain(plan: Plan, pooling: list[str] | None) -> None:
    width = int(plan.source.config.get("hidden_size") or plan.source.config.get("dim") or 0)
    width *= len(pooling or [None])
    for d in plan.dense:
        if width and d.in_features != width:
            raise ManifestError("$.model", f"Dense module {d.path.name} takes {d.in_features} features but the "
                                           f"readout before it produces {width}")
        width = d.out_features


def _resolve_late(plan: Plan, manifest: Manifest) -> None:
    plan.rows = manifest.readout("rows", "attention")
    norm = manifest.readout("normalize", "l2")
    if norm != "l2":
        raise ManifestError("$.readout.normalize", "late_interaction scores by MaxSim over unit vectors: expected 'l2'")
    plan.normalize = "l2"
    if plan.source.st_pooling is not None:
        raise ManifestError("$.model", "modules.json pools to one vector; late_interaction keeps every row")
    plan.dense = list(plan.source.dense)
    _check_dense_chain(plan, None)


def _resolve_sparse(plan: Plan, manifest: Manifest) -> None:
    pooling = _pooling_list(manifest.readout("pooling", "max"))
    if pooling != ["max"]:
        raise ManifestError("$.readout.pooling", f"sparse (SPLADE) pools with max over rows; got {pooling}")
    plan.pooling = ["max"]
    plan.rows = manifest.readout("rows", "attention")


def _resolve_labels(plan: Plan, data: dict[str, Any]) -> None:
    config = plan.source.config
    declared = plan.source.labels()
    width = len(declared) if declared else int(config.get("num_labels", 2))
    generic = declared is None or all(GENERIC_LABEL.match(x) for x in declared)
    stated = data.get("labels")
    if stated is not None:
        if len(set(stated)) != len(stated):
            dup = sorted({x for x in stated if stated.count(x) > 1})
            raise ManifestError("$.labels", f"labels repeat: {dup}")
        if len(stated) != width:
            raise ManifestError("$.labels", f"{len(stated)} labels but the head has {width} outputs")
        if not generic and stated != declared:
            raise ManifestError("$.labels", f"manifest says {stated} but config.json id2label declares {declared}")
        plan.labels = list(stated)
    else:
        plan.labels = list(declared) if declared else [f"LABEL_{i}" for i in range(width)]
        if generic:
            plan.notes.append("label names are generic (LABEL_i): state 'labels' to name them")


def _resolve_thresholds(plan: Plan, thresholds: Any) -> None:
    n = len(plan.labels or [])
    values = [float(thresholds)] * n if isinstance(thresholds, (int, float)) else [float(t) for t in thresholds]
    if len(values) != n:
        raise ManifestError("$.thresholds", f"{len(values)} thresholds for {n} labels")
    for i, v in enumerate(values):
        if not 0.0 < v < 1.0:
            raise ManifestError(f"$.thresholds[{i}]" if not isinstance(thresholds, (int, float)) else "$.thresholds",
                                f"expected a probability strictly between 0 and 1, got {v}")
    plan.thresholds = values
