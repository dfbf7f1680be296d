"""The built-in families' manifest resolvers: how a family's own manifest fields are resolved against the model
directory (pooling, projection, normalization, score type, QA windows).

No table here picks them: each family names its resolver in its exporter part
(`readout_sdk.families.parts.ExporterHooks`, ``resolve="readout_export.planning.family_hooks:resolve_embedding"``),
exactly as a plugin family names its own (``resolve="my_plugin.export:resolve"``), and :func:`readout_hook` asks
the family. Families naming none export a transformers head as it is; what torch loads and which readout stages
follow are ``Family.head`` and ``Family.stages`` in the SDK's registry.
"""
from __future__ import annotations

from typing import Any, Callable

from readout_sdk.abi import POOLING_MODES
from readout_sdk.families import get as get_family

from readout_export.errors import ManifestError
from readout_export.planning.manifest import Manifest
from readout_export.planning.plan import Plan, agree, pooling_list

Hook = Callable[[Plan, Manifest], None]
# pooling modes whose prompt exclusion is "the prompt's rows are not pooled" (the graph's rule, and
# sentence-transformers' for these); weighted_mean and last_token count positions there, so are refused
PROMPT_EXCLUDING_MODES = ("mean", "mean_sqrt_len", "max", "cls")
# config.json fields by which a causal LM rescales or caps its logits after the LM head (Gemma 2, Cohere, Granite)
SCALED_LOGITS = ("final_logit_softcapping", "logit_scale", "logits_scaling")


def resolve_embedding(plan: Plan, manifest: Manifest) -> None:
    """An embedding's pooling, rows, normalization, Dense chain and score type, agreed with its
    sentence-transformers files."""
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
    allowed = plan.spec.score_types
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


def resolve_late(plan: Plan, manifest: Manifest) -> None:
    """A late-interaction family's rows and unit normalization, with its Dense chain (no pooling: it keeps
    every row)."""
    plan.rows = manifest.readout("rows", "attention")
    norm = manifest.readout("normalize", "l2")
    if norm != "l2":
        raise ManifestError("$.readout.normalize", "late_interaction scores by MaxSim over unit vectors: expected 'l2'")
    plan.normalize = "l2"
    if plan.source.st_pooling is not None:
        raise ManifestError("$.model", "modules.json pools to one vector; late_interaction keeps every row")
    plan.dense = list(plan.source.dense)
    _check_dense_chain(plan, None)


def resolve_sparse(plan: Plan, manifest: Manifest) -> None:
    """A SPLADE family's max pooling over its rows."""
    pooling = pooling_list(manifest.readout("pooling", "max"))
    if pooling != ["max"]:
        raise ManifestError("$.readout.pooling", f"sparse (SPLADE) pools with max over rows; got {pooling}")
    plan.pooling = ["max"]
    plan.rows = manifest.readout("rows", "attention")


def resolve_cross_encoder(plan: Plan, manifest: Manifest) -> None:
    """A cross-encoder's score type (from its config or the manifest), or a yes/no reranker's fixed one."""
    spec = plan.spec
    if "yes_no" in manifest.data:
        _resolve_yes_no_head(plan, manifest)
        return
    saved = plan.source.config.get("architectures")
    if isinstance(saved, list) and len(saved) == 1 and str(saved[0]).endswith("ForCausalLM"):
        raise ManifestError("$.yes_no", f"config.json declares {saved[0]}, a causal LM: a yes/no reranker "
                                        "(Qwen3-Reranker) is exported with a yes_no section naming its answer tokens "
                                        "and template ({} takes Qwen3-Reranker's)")
    plan.score_type = agree("$.score_type", plan.source.cross_activation, manifest.data.get("score_type"),
                            "config.json (sentence_transformers.activation_fn)")
    if plan.score_type is None:
        raise ManifestError("$.score_type", "cross_encoder needs its score type (logit, sigmoid or softmax): "
                                            "the model directory does not declare one, so state it")
    if plan.score_type not in spec.score_types:
        raise ManifestError("$.score_type", f"expected one of {list(spec.score_types)}, got {plan.score_type!r}")
    if plan.score_type == "softmax" and len(plan.labels or []) < 2:
        raise ManifestError("$.score_type", "softmax needs at least 2 classes; this head has 1")


def _resolve_yes_no_head(plan: Plan, manifest: Manifest) -> None:
    """A yes/no reranker's output, fixed by the variant (`readout_sdk.families.cross_encoder`): one ``yes`` output,
    logit(yes) - logit(no), declared sigmoid; the manifest may restate the score type only as that. Its answer
    tokens and template need the tokenizer: :func:`resolve_yes_no`."""
    from readout_sdk.families.cross_encoder import YES_NO_LABELS, YES_NO_SCORE_TYPE

    data = manifest.data
    if "labels" in data:
        raise ManifestError("$.labels", f"a yes/no reranker's one output is {list(YES_NO_LABELS)} (logit(yes) - "
                                        "logit(no)); its answer tokens are $.yes_no.yes and $.yes_no.no")
    stated = data.get("score_type")
    if stated is not None and stated != YES_NO_SCORE_TYPE:
        raise ManifestError("$.score_type", f"a yes/no reranker scores sigmoid(yes - no) = softmax([no, yes])[yes]: "
                                            f"expected {YES_NO_SCORE_TYPE!r}, got {stated!r}")
    if "adapter" in data:  # the merged and the applied adapter's causal LM are not wired through the LM-head rows
        raise ManifestError("$.adapter", "a yes/no reranker with a peft adapter is not exported in this release; "
                                         "merge the adapter into the checkpoint first")
    if (data.get("long_inputs") or {}).get("policy", "truncate") != "truncate":
        raise ManifestError("$.long_inputs.policy", "a templated pair is one text: it is truncated, never windowed")
    plan.labels, plan.score_type = list(YES_NO_LABELS), YES_NO_SCORE_TYPE


def resolve_yes_no(plan: Plan, stated: dict[str, Any]) -> None:
    """``plan.yes_no``: the manifest's answer tokens, each the one id the tokenizer encodes it as, and its template
    (Qwen3-Reranker's by default, `readout_sdk.pair_template`), which must leave room within max_length for one
    token of the query and of the document (else refused: only the texts are ever cut, never the template)."""
    from readout_sdk.pair_template import PairTemplate, TemplateEncoder, TemplateError

    for key in SCALED_LOGITS:  # the difference row is the score only where logits are the head's matmul as is
        value = plan.source.config.get(key)
        if value not in (None, 1, 1.0):
            raise ManifestError("$.model", f"config.json {key} is {value!r}: this causal LM rescales its logits, "
                                           "which a yes/no reranker's LM-head rows do not reproduce")
    backend = plan.tokenizer.backend
    answers: dict[str, dict[str, Any]] = {}
    for key in ("yes", "no"):
        token = stated.get(key, key)
        ids = backend.encode(token, add_special_tokens=False).ids
        if len(ids) != 1:
            pieces = [backend.id_to_token(i) for i in ids]
            raise ManifestError(f"$.yes_no.{key}", f"{token!r} is {len(ids)} tokens {pieces} for the tokenizer in "
                                                   f"{plan.source.tokenizer_dir}; an answer token must be exactly one "
                                                   "id (the graph reads its one LM-head row)")
        answers[key] = {"token": token, "token_id": int(ids[0])}
    if answers["yes"]["token_id"] == answers["no"]["token_id"]:
        raise ManifestError("$.yes_no.no", f"{answers['no']['token']!r} is the same token as $.yes_no.yes "
                                           f"(id {answers['yes']['token_id']})")
    try:
        template = PairTemplate.from_section(stated.get("template") or {})
    except TemplateError as e:
        raise ManifestError(f"$.yes_no.template.{str(e).split(':')[0]}", str(e).split(": ", 1)[1]) from None
    fixed = TemplateEncoder(template, backend, plan.max_length).template_tokens()
    if fixed + 2 > plan.max_length:
        raise ManifestError("$.yes_no.template", f"the template alone is {fixed} tokens; max_length {plan.max_length} "
                                                 "leaves no room for one token of the query and one of the document "
                                                 f"(needs at least {fixed + 2})")
    plan.yes_no = {"template": template.section() | {"tokens": fixed}, **answers}


def resolve_qa(plan: Plan, manifest: Manifest) -> None:
    """Extractive QA's null policy and window stride (its long inputs are always windows, best span)."""
    plan.null_policy = manifest.data.get("null_policy", "none")
    plan.stride = int(manifest.data.get("stride", min(128, plan.max_length // 4)))
    if plan.stride >= plan.max_length // 2:
        raise ManifestError("$.stride", f"expected less than half of max_length ({plan.max_length // 2}), "
                                        f"got {plan.stride}")
    plan.long_inputs = {"policy": "windows", "stride": plan.stride, "aggregation": "best_span"}


def readout_hook(family: str) -> Hook | None:
    """The family's manifest resolver (its `ExporterHooks.resolve`, built-in or plugin alike), or None for a
    transformers head exported as it is."""
    return get_family(family).exporter_hooks.hook("resolve")
