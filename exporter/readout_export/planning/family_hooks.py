"""The exporter's per-family hooks: how a family's own manifest fields are resolved against the model
directory (pooling, projection, normalization, score type, QA windows). Families without a hook here
export a transformers head as it is; what torch loads and which readout stages follow are
``Family.head`` and ``Family.stages`` in the SDK's registry.
"""
from __future__ import annotations

from typing import Callable

from readout_sdk.abi import POOLING_MODES
from readout_sdk.families import get as get_family

from readout_export.errors import ManifestError
from readout_export.planning.manifest import Manifest
from readout_export.planning.plan import Plan, agree, pooling_list

Hook = Callable[[Plan, Manifest], None]
# pooling modes whose prompt exclusion is "the prompt's rows are not pooled" (the graph's rule, and
# sentence-transformers' for these); weighted_mean and last_token count positions there, so are refused
PROMPT_EXCLUDING_MODES = ("mean", "mean_sqrt_len", "max", "cls")


def _resolve_embedding(plan: Plan, manifest: Manifest) -> None:
    source = plan.source
    st = bool(source.st_modules)
    plan.pooling = agree("$.readout.pooling", source.st_pooling, pooling_list(manifest.readout("pooling")),
                          "1_Pooling/config.json")
    if not plan.pooling:
        raise ManifestError("$.readout.pooling", f"the model directory declares no pooling; state one of "
                                                 f"{list(POOLING_MODES)}")
    if st and not source.st_include_prompt:
        unsupported = [m for m in plan.pooling if m not in PROMPT_EXCLUDING_MODES]
        if unsupported:  # sentence-transformers' own rule for these modes counts positions, not pooled rows
            raise ManifestError("$.model", f"1_Pooling excludes prompt rows (include_prompt: false) under pooling "
                                           f"{unsupported}; readout-abi/1 excludes prompts only under "
                                           f"{list(PROMPT_EXCLUDING_MODES)}")
        plan.prompt_excluded = True
    # sentence-transformers pools over every attention row, special tokens included.
    plan.rows = agree("$.readout.rows", "attention" if source.st_pooling else None, manifest.readout("rows"),
                       "the sentence-transformers Pooling module") or "attention"
    plan.normalize = agree("$.readout.normalize", ("l2" if source.st_normalize else "none") if st else None,
                            manifest.readout("normalize"), "modules.json") or "none"
    plan.dense = list(source.dense)
    _check_dense_chain(plan, plan.pooling)
    declared_sim = source.similarity
    plan.score_type = agree("$.score_type", declared_sim, manifest.data.get("score_type"),
                             "config_sentence_transformers.json (similarity_fn_name)") or "cosine"
    allowed = get_family(plan.family).score_types
    if plan.score_type not in allowed:
        raise ManifestError("$.score_type", f"expected one of {list(allowed)}, got {plan.score_type!r}")


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
    pooling = pooling_list(manifest.readout("pooling", "max"))
    if pooling != ["max"]:
        raise ManifestError("$.readout.pooling", f"sparse (SPLADE) pools with max over rows; got {pooling}")
    plan.pooling = ["max"]
    plan.rows = manifest.readout("rows", "attention")


def _resolve_cross_encoder(plan: Plan, manifest: Manifest) -> None:
    spec = get_family(plan.family)
    plan.score_type = agree("$.score_type", plan.source.cross_activation, manifest.data.get("score_type"),
                            "config.json (sentence_transformers.activation_fn)")
    if plan.score_type is None:
        raise ManifestError("$.score_type", "cross_encoder needs its score type (logit, sigmoid or softmax): "
                                            "the model directory does not declare one, so state it")
    if plan.score_type not in spec.score_types:
        raise ManifestError("$.score_type", f"expected one of {list(spec.score_types)}, got {plan.score_type!r}")
    if plan.score_type == "softmax" and len(plan.labels or []) < 2:
        raise ManifestError("$.score_type", "softmax needs at least 2 classes; this head has 1")


def _resolve_qa(plan: Plan, manifest: Manifest) -> None:
    plan.null_policy = manifest.data.get("null_policy", "none")
    plan.stride = int(manifest.data.get("stride", min(128, plan.max_length // 4)))
    if plan.stride >= plan.max_length // 2:
        raise ManifestError("$.stride", f"expected less than half of max_length ({plan.max_length // 2}), "
                                        f"got {plan.stride}")
    plan.long_inputs = {"policy": "windows", "stride": plan.stride, "aggregation": "best_span"}


HOOKS: dict[str, Hook] = {"embedding": _resolve_embedding, "late_interaction": _resolve_late,
                          "sparse": _resolve_sparse, "cross_encoder": _resolve_cross_encoder,
                          "extractive_qa": _resolve_qa}


def readout_hook(family: str) -> Hook | None:
    """The family's resolver hook, or None for a transformers head exported as it is."""
    return HOOKS.get(get_family(family).name)
