"""cross_encoder: a score per (query, document) pair with the declared score type; rerank sorts by it.

A decoder yes/no reranker (Qwen3-Reranker and its kind) is this family too, not a family of its own: its pair
is formatted through the prompt template its record states (``$.input.template``, `readout_sdk.pair_template`),
its graph reads a causal LM's last attended row through the two LM-head rows it needs, and its one output is
``logit("yes") - logit("no")`` (``$.readout.yes_no``), declared ``sigmoid``: ``sigmoid(yes - no)`` is
``softmax([no, yes])[yes]``. So the caller keeps ``score_pairs``, ``rerank``, HTTP ``/rerank`` and the parity
metrics of any one-score cross-encoder, and never formats the template.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from readout_sdk import agreement as A
from readout_sdk.batching import Prepared
from readout_sdk.errors import AbiError, InputRefused
from readout_sdk.families.base import Context, Family, Head, TensorSpec
from readout_sdk.families.parts import builtin_resolver
from readout_sdk.input_kinds.pair import KIND as PAIR
from readout_sdk.pair_template import TemplateError
from readout_sdk.results import Scored

# what the exporter loads for a yes/no reranker (`CrossEncoderFamily.head_for`): the causal LM as saved
YES_NO_HEAD = Head("AutoModelForCausalLM", ("logits",), (False,))
YES_NO_LABELS = ("yes",)  # the one output: the yes token's logit minus the no token's
YES_NO_SCORE_TYPE = "sigmoid"  # sigmoid(yes - no) = softmax([no, yes])[yes]


class CrossEncoderFamily(Family):
    name = "cross_encoder"
    task = "relevance"
    calibrators = ("temperature",)
    outputs = (TensorSpec("logits", "float32", ("batch", "classes")),)
    input_kind = PAIR.name
    fields = ("query", "document")
    pair_roles = ("query", "document")
    label_axis = True
    score_types = ("sigmoid", "logit", "softmax")
    calls = ("score_pairs", "rerank")
    result = Scored
    manifest_fields = frozenset({"labels", "score_type", "yes_no"})
    head = Head("AutoModelForSequenceClassification", ("logits",), (False,))
    exporter_hooks = builtin_resolver("resolve_cross_encoder")  # its own manifest fields (`parts.ExporterHooks`)
    decision = "sort by score, descending; ties keep input order"
    metric_names = ("rank_correlation", "topk_agreement", "argmax_agreement")
    record_keys = ("score", "scores", "truncated")
    http_routes = ("/predict", "/rerank")
    templated = True
    variant_heads = (YES_NO_HEAD,)

    def head_for(self, plan: Any) -> Head:
        """A plan naming a yes/no reranker (``plan.yes_no``) loads the causal LM; any other, the classifier head."""
        return YES_NO_HEAD if getattr(plan, "yes_no", None) is not None else self.head

    def check_record(self, record: Mapping[str, Any]) -> None:
        """A yes/no reranker's record states its template and its two tokens together, one ``yes`` output
        declared ``sigmoid``, and no windows (the template heads the one text)."""
        super().check_record(record)
        template, yes_no = record["input"].get("template"), record["readout"].get("yes_no")
        if (template is None) != (yes_no is None):
            where, other = ("$.readout.yes_no", "$.input.template") if template is None else \
                ("$.input.template", "$.readout.yes_no")
            raise AbiError(f"ABI record {where}: a yes/no reranker states {where} and {other} together; the record "
                           f"states only {other}")
        if yes_no is None:
            return
        out = record["output"]
        if tuple(out.get("labels") or ()) != YES_NO_LABELS or out.get("score_type") != YES_NO_SCORE_TYPE:
            raise AbiError(f"ABI record $.output: a yes/no reranker's one output is {list(YES_NO_LABELS)} declared "
                           f"{YES_NO_SCORE_TYPE!r}, the record states {out.get('labels')} {out.get('score_type')!r}")
        if (record["input"].get("long_inputs") or {}).get("policy", "truncate") != "truncate":
            raise AbiError("ABI record $.input.long_inputs: a templated pair is one text; it is truncated, never "
                           "windowed")

    def input_section(self, plan: Any) -> dict[str, Any]:
        """A yes/no reranker's ``$.input.template``."""
        return {"template": dict(plan.yes_no["template"])} if getattr(plan, "yes_no", None) else {}

    def readout_section(self, plan: Any) -> dict[str, Any]:
        """A yes/no reranker's ``$.readout.yes_no``: its two tokens and ids, and what its output is."""
        if not getattr(plan, "yes_no", None):
            return {}
        return {"yes_no": {"yes": dict(plan.yes_no["yes"]), "no": dict(plan.yes_no["no"]),
                           "output": "logit_yes_minus_no"}}

    def encode(self, ctx: Context, base: int, items: Sequence[Any], check: bool = True,
               role: Any = None) -> list[list[Prepared]]:
        """Pairs through the record's template where it states one (`readout_sdk.pair_template`), else as a
        tokenizer pair."""
        if ctx.template is None:
            return super().encode(ctx, base, items, check, role)
        try:
            encoded = ctx.template.encode_batch(items)
        except TemplateError as e:
            raise InputRefused(f"items {base}..{base + len(items) - 1}: {e}") from None
        return [[Prepared((enc, ), cut)] for enc, cut in encoded]

    def decide(self, ctx: Context, item: tuple[str, str], outs: list[dict[str, np.ndarray]], parts: Any,
               truncated: bool) -> Scored:
        values = self.class_probabilities(ctx, outs)
        # the score of a multi-class cross-encoder is its last class (e.g. "entailment" / "relevant")
        return Scored(-1, float(values[-1]), item[1], tuple(map(float, values)), truncated)

    def class_probabilities(self, ctx: Context, outs: list[dict[str, np.ndarray]]) -> np.ndarray:
        """Every class's declared score for one pair, through the calibration layer."""
        return ctx.scores(outs[0]["logits"])

    def collect(self, ctx: Context, results: list[Scored], truncated: tuple[bool, ...]) -> list[Scored]:
        return [Scored(i, r.score, r.document, r.scores, r.truncated) for i, r in enumerate(results)]

    def relevance(self, engine: Any, pairs: Any) -> np.ndarray:
        """Each pair's declared score (the last class's, as `score_pairs` gives it)."""
        return np.array([s.score for s in engine.score_pairs(list(pairs))], np.float64)

    def agreement(self, ctx: Context, got: list[Scored], ref: list[Scored]) -> dict[str, float]:
        g = np.array([x.score for x in got])
        r = np.array([x.score for x in ref])
        k = min(3, len(g))
        m = {"rank_correlation": A.rank_agreement(g, r), "topk_agreement": float(A.top_k_agreement(g, r, k) == 1.0)}
        if len(ctx.labels) > 1:
            tied = A.argmax_agree([x.scores for x in got], [x.scores for x in ref])  # ties within noise agree
            m["argmax_agreement"] = float(np.mean(tied)) if tied else 1.0
        return m

    def record(self, r: Scored) -> dict[str, Any]:
        return {"score": r.score, "scores": list(r.scores), "truncated": r.truncated}

    def arrow_types(self, pa: Any, labels: Any) -> dict[str, Any]:
        return {"score": pa.float64(), "scores": pa.list_(pa.float64()), "truncated": pa.bool_()}


FAMILY = CrossEncoderFamily()
