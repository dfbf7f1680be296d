"""token_classification: entities with character offsets (transformers' token-classification rule).

Long texts may be split into windows with a stride: each source token is decided by the one window
that owns it (where it is farthest from an edge, `readout_sdk.windows`), and entities are merged
across window borders on the owned tokens, with offsets into the source text.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from readout_sdk import agreement as A
from readout_sdk.arguments import one_of
from readout_sdk.decode import scores as S
from readout_sdk.decode.tagging import AGGREGATIONS, Pieces, decode_entities_many, pieces_many
from readout_sdk.families.base import Context, Family, Head, TensorSpec
from readout_sdk.results import TaggedText


def tag_scheme(labels: list[str]) -> str:
    """BIO/IOB2 when every label is O or B-/I-X; BIOES with E-/S-; otherwise per-token labels only."""
    prefixes = {lab.split("-", 1)[0] for lab in labels if lab != "O"}
    if all(lab == "O" or "-" in lab for lab in labels) and prefixes:
        if prefixes <= {"B", "I"}:
            return "BIO"
        if prefixes <= {"B", "I", "E", "S"}:
            return "BIOES"
    return "none"


class TokenClassificationFamily(Family):
    name = "token_classification"
    task = "entities"
    outputs = (TensorSpec("token_logits", "float32", ("batch", "sequence", "classes")),)
    label_axis = True
    score_types = ("softmax",)
    calls = ("tag",)
    result = TaggedText
    manifest_fields = frozenset({"labels", "long_inputs"})
    aggregations = ("owned_tokens",)
    head = Head("AutoModelForTokenClassification", ("logits",), (True,))
    decision = "argmax per token; entities by the tag scheme and the call's aggregation"
    metric_names = ("entity_agreement",)
    record_keys = ("entities", "truncated")
    http_routes = ("/entities",)
    bench_peer = "token-classification"
    uses_offsets = True

    def output_section(self, plan: Any, dims: Mapping[str, int]) -> dict[str, Any]:
        return super().output_section(plan, dims) | {"tag_scheme": tag_scheme(plan.labels or [])}

    def options(self, ctx: Context, aggregation: str = "simple") -> dict[str, Any]:
        return {"aggregation": one_of("aggregation", aggregation, AGGREGATIONS)}

    def decide(self, ctx: Context, item: str, outs: list[dict[str, np.ndarray]], parts: Any, truncated: bool,
               aggregation: str = "simple") -> TaggedText:
        return self.decide_all(ctx, [(item, outs, parts, truncated)], aggregation=aggregation)[0]

    def decide_all(self, ctx: Context, items: Any, aggregation: str = "simple") -> list[TaggedText]:
        """Entities of many texts decoded as one array (one softmax, pieces_many, decode_entities_many):
        the per-text numpy work was most of tag()'s own cost."""
        texts = [item for item, _, _, _ in items]
        entities = decode_entities_many(texts, self.token_pieces_many(ctx, [(i, o, p) for i, o, p, _ in items]),
                                        list(ctx.labels), aggregation, scheme=ctx.output.get("tag_scheme", "BIO"))
        return [TaggedText(tuple(e), cut) for e, (_, _, _, cut) in zip(entities, items)]

    def token_pieces(self, ctx: Context, item: str, outs: list[dict[str, np.ndarray]], parts: Any) -> Pieces:
        """Every source token of one text once, in text order, with its class probabilities: the owned,
        non-special rows of its windows (what decoding and token-level evaluation both read), as arrays
        (``Pieces``: ``scores`` (n, labels), ``start``, ``end``, ``is_subword``; iterating gives ``Piece`` rows)."""
        return self.token_pieces_many(ctx, [(item, outs, parts)])[0]

    def token_pieces_many(self, ctx: Context, items: list[tuple[str, list[dict[str, np.ndarray]], Any]]) -> list[Pieces]:
        """:meth:`token_pieces` of each (text, outs, parts), computed as one array."""
        logits = [out["token_logits"] for _, outs, _ in items for out in outs]
        if not logits:
            return [Pieces.concat([]) for _ in items]
        probs = iter(np.split(S.softmax(np.concatenate(logits)), np.cumsum([len(x) for x in logits])[:-1]))
        word_aware = bool(ctx.subword_prefix)  # token lengths by id (ctx.token_lengths): no token strings
        read_ids = word_aware or ctx.unk is not None
        windows, owner = [], []
        for k, (item, outs, parts) in enumerate(items):
            encs = [p.encodings[0] for p in parts]
            owned = ctx.owned_rows(encs) if len(encs) > 1 else [None]
            these = list(zip(encs, [next(probs) for _ in outs], owned))
            if ctx.window_direction == "left":  # tokenizers lists left-truncated windows from the end of the text
                these.reverse()
            for enc, prob, own in these:
                skip = enc.special_tokens_mask
                if own is not None:
                    skip = np.asarray(skip, dtype=bool) | ~np.asarray(own, dtype=bool)
                windows.append((item, prob, enc.offsets, skip, enc.ids if read_ids else (), ()))
                owner.append(k)
        per_window = pieces_many(windows, ctx.unk, ctx.subword_prefix, ctx.token_lengths if word_aware else None)
        grouped: list[list[Pieces]] = [[] for _ in items]
        for k, ps in zip(owner, per_window):
            grouped[k].append(ps)
        return [Pieces.concat(g) for g in grouped]

    def agreement(self, ctx: Context, got: list[TaggedText], ref: list[TaggedText]) -> dict[str, float]:
        def spans(t: TaggedText) -> list[tuple[str, int, int]]:
            return [(e.label, e.start, e.end) for e in t.entities]
        return {"entity_agreement": A.same_fraction([spans(g) for g in got], [spans(r) for r in ref])}

    def record(self, r: TaggedText) -> dict[str, Any]:
        return {"entities": [{"label": e.label, "start": e.start, "end": e.end, "text": e.text, "score": e.score}
                             for e in r.entities], "truncated": r.truncated}

    def arrow_types(self, pa: Any, labels: Any) -> dict[str, Any]:
        entity = pa.struct([("label", pa.string()), ("start", pa.int64()), ("end", pa.int64()),
                            ("text", pa.string()), ("score", pa.float64())])
        return {"entities": pa.list_(entity), "truncated": pa.bool_()}


FAMILY = TokenClassificationFamily()
