"""extractive_qa: answer spans in a context, found over overlapping windows.

Per window, start and end scores are softmaxes over the context rows (plus [CLS], as transformers'
QA pipeline did); the best admissible spans (start <= end, context rows, at most max_answer_length
rows) of all windows compete, and spans map to whole words of the context (the pipeline's
``align_to_words=True``) unless the call asks for token offsets.

One deliberate difference from transformers 4.x's pipeline (checked against the real one,
tests/families/test_qa_pipeline_oracle.py): the pipeline takes each window's best ``2 * top_k + 10``
token spans (``top_k`` without word alignment), maps them to text, and *adds up* the scores of candidates
whose text is equal ignoring case (the same span seen in two overlapping windows, token spans that widen
to the same words, the same words elsewhere in the context), keeping the first one's offsets. So its
score is no probability (it can pass 1), counts a span in a window overlap twice, and its best answer can
change with ``top_k`` or the stride. Here a span's score is its own ``p_start * p_end`` in one window (the
record's ``span_softmax``), which the null threshold is calibrated against; the decision option
``merge_same_text=True`` gives the pipeline's answers instead (text, offsets and summed score).
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from readout_sdk import agreement as A
from readout_sdk.arguments import flag, positive_int
from readout_sdk.batching import Prepared
from readout_sdk.decode.spans import best_spans, window_probabilities
from readout_sdk.decode.words import span_chars
from readout_sdk.errors import InputRefused
from readout_sdk.families.base import Context, Family, Head, TensorSpec
from readout_sdk.families.parts import builtin_resolver
from readout_sdk.input_kinds.pair import KIND as PAIR
from readout_sdk.results import Answer

MAX_ANSWER_LENGTH = 30  # in tokens: transformers' run_qa / postprocess_qa_predictions default (the pipeline's is 15)
PIPELINE_EXTRA_CANDIDATES = 10  # the pipeline keeps 2 * top_k + 10 spans per window when aligning to words


def _context_rows(sequence_ids: list[int | None]) -> np.ndarray:
    """Rows whose sequence id is 1 (the context), as ``[sid == 1 for sid in sequence_ids]``: one block
    in a (question, context) window, found with list searches; anything else row by row."""
    if not isinstance(sequence_ids, (list, tuple)):
        sequence_ids = list(sequence_ids)
    rows = np.zeros(len(sequence_ids), dtype=bool)
    count = sequence_ids.count(1)
    if count:
        lo = sequence_ids.index(1)
        if sequence_ids[lo:lo + count].count(1) == count:
            rows[lo:lo + count] = True
        else:
            rows[:] = [sid == 1 for sid in sequence_ids]
    return rows


class _OffsetsOnce:
    """An encoding whose ``offsets`` list is fetched once (``tokenizers`` builds it on every access)."""

    __slots__ = ("_enc", "offsets")

    def __init__(self, enc: Any) -> None:
        self._enc, self.offsets = enc, enc.offsets

    def __len__(self) -> int:
        return len(self._enc)

    def token_to_word(self, token_index: int) -> int | None:
        return self._enc.token_to_word(token_index)

    def word_to_chars(self, word_index: int, sequence_index: int = 0) -> tuple[int, int] | None:
        return self._enc.word_to_chars(word_index, sequence_index=sequence_index)


def _merged_by_text(candidates: list[tuple[float, int, int]], context: str) -> list[tuple[float, int, int]]:
    """transformers 4.x ``QuestionAnsweringPipeline.postprocess``: candidates (in window order, best first in
    each window) whose ``context[start:end]`` is equal ignoring case (``str.lower``) become one, with the
    scores added and the first candidate's offsets; then best first, ties in that order."""
    merged: dict[str, list] = {}
    for score, a, b in candidates:
        key = context[a:b].lower()
        if key in merged:
            merged[key][0] += score
        else:
            merged[key] = [score, a, b]
    return sorted((tuple(m) for m in merged.values()), key=lambda m: -m[0])  # type: ignore[misc]


class ExtractiveQAFamily(Family):
    name = "extractive_qa"
    task = "answer_span"
    calibrators = ("null_threshold",)
    outputs = (TensorSpec("start_logits", "float32", ("batch", "sequence")),
               TensorSpec("end_logits", "float32", ("batch", "sequence")))
    input_kind = PAIR.name
    fields = ("question", "context")
    pair_roles = ("question", "context")
    single_item = True
    score_types = ("span_softmax",)
    calls = ("answer",)
    result = Answer
    manifest_fields = frozenset({"null_policy", "stride"})
    aggregations = ("best_span",)
    head = Head("AutoModelForQuestionAnswering", ("start_logits", "end_logits"), (True, True))
    exporter_hooks = builtin_resolver("resolve_qa")  # its own manifest fields (`parts.ExporterHooks`)
    decision = "best span over all windows by p_start * p_end; the null answer competes when null_policy is cls"
    metric_names = ("span_agreement",)
    record_keys = ("answer", "start", "end", "score", "is_null")
    http_routes = ("/answers",)
    checked_role = "context"
    uses_offsets = True
    truncation_strategy = "only_second"  # the question is kept whole; the context is windowed

    def output_section(self, plan: Any, dims: Mapping[str, int]) -> dict[str, Any]:
        return super().output_section(plan, dims) | {
            "null_policy": plan.null_policy, "window": {"stride": plan.stride, "spans_cross_windows": False},
            "span": "start <= end, context rows only", "max_answer_length": MAX_ANSWER_LENGTH,
            "align_to_words": True}

    def options(self, ctx: Context, top_k: int = 1, max_answer_length: int | None = None,
                align_to_words: bool | None = None, merge_same_text: bool | None = None) -> dict[str, Any]:
        if max_answer_length is None:
            max_answer_length = int(ctx.output.get("max_answer_length", MAX_ANSWER_LENGTH))
        positive_int("top_k", top_k)
        positive_int("max_answer_length", max_answer_length)
        if flag("align_to_words", align_to_words) is None:
            align_to_words = bool(ctx.output.get("align_to_words", True))
        merge = bool(flag("merge_same_text", merge_same_text))
        return {"top_k": top_k, "max_answer_length": max_answer_length, "align_to_words": bool(align_to_words),
                "merge_same_text": merge}

    def decide(self, ctx: Context, item: tuple[str, str], outs: list[dict[str, np.ndarray]],
               parts: list[Prepared], truncated: bool, top_k: int = 1, max_answer_length: int = MAX_ANSWER_LENGTH,
               align_to_words: bool = True, merge_same_text: bool = False) -> list[Answer]:
        context = item[1]
        spans, null_score = self.scored(ctx, outs, parts, top_k, max_answer_length, align_to_words,
                                        context if merge_same_text else None)
        answers = [Answer(context[a:b], a, b, score) for score, a, b in spans]
        if null_score is not None:  # the decision layer's rule: null wins by more than null_threshold
            null = Answer("", 0, 0, null_score, is_null=True)
            margin = float(ctx.output.get("null_threshold", 0.0))
            if not answers or null_score - answers[0].score > margin:
                answers.insert(0, null)
            else:  # below the best span, at its score's rank among the rest
                rest = answers[1:] + [null]
                rest.sort(key=lambda x: -x.score)
                answers = answers[:1] + rest
        if not answers:
            raise InputRefused("no admissible answer span: the context is empty after truncation")
        return answers[:top_k]

    def scored(self, ctx: Context, outs: list[dict[str, np.ndarray]], parts: list[Prepared], top_k: int = 1,
               max_answer_length: int = MAX_ANSWER_LENGTH, align_to_words: bool = True,
               merge_text_of: str | None = None) -> tuple[list[tuple[float, int, int]], float | None]:
        """The best ``top_k`` distinct spans over all windows, best first, as (score, start char, end char),
        and the null answer's score (None unless the null policy is cls): what decide() and the
        null-threshold fit both read.

        With ``merge_text_of`` (the context string), transformers 4.x pipeline's rule instead: each window's
        best ``2 * top_k + 10`` spans (``top_k`` without word alignment), in window order and best first
        within a window, are merged by their text ignoring case (scores added, the first one's offsets
        kept), then sorted by score (stable)."""
        has_null = ctx.output.get("null_policy") == "cls"
        cls_id = ctx.record["input"]["special_token_ids"].get("cls")
        candidates: list[tuple[float, int, int]] = []
        null_score = None
        for part, o in zip(parts, outs):
            w = part.encodings[0]
            context_rows = _context_rows(w.sequence_ids)
            # like transformers' QA pipeline, the [CLS] row stays in the softmax whatever the null policy
            null_row = 0 if has_null or (cls_id is not None and w.ids[0] == cls_id) else None
            p_s, p_e = window_probabilities(o["start_logits"], o["end_logits"], context_rows, null_row)
            if has_null and null_row is not None:
                score = float(p_s[null_row] * p_e[null_row])
                null_score = score if null_score is None else min(null_score, score)
            per_window = top_k
            if merge_text_of is not None and align_to_words:
                per_window = 2 * top_k + PIPELINE_EXTRA_CANDIDATES
            found = best_spans(p_s, p_e, context_rows, max_answer_length, per_window)
            enc = _OffsetsOnce(w) if len(found) > 1 else w  # span_chars reads all offsets on every call
            for score, s, e in found:
                candidates.append((score, *span_chars(enc, s, e, align_to_words)))
        if merge_text_of is not None:
            return _merged_by_text(candidates, merge_text_of)[:top_k], null_score
        seen, spans = set(), []
        for score, a, b in sorted(candidates, key=lambda c: (-c[0], c[1], c[2])):
            if (a, b) not in seen:
                seen.add((a, b))
                spans.append((score, a, b))
        return spans[:top_k], null_score

    def agreement(self, ctx: Context, got: list[list[Answer]], ref: list[list[Answer]]) -> dict[str, float]:
        def best(answers: list[Answer] | None) -> tuple[int, int, bool] | None:
            return (answers[0].start, answers[0].end, answers[0].is_null) if answers else None
        return {"span_agreement": A.same_fraction([best(g) for g in got], [best(r) for r in ref])}

    def record(self, r: Answer) -> dict[str, Any]:
        return {"answer": r.text, "start": r.start, "end": r.end, "score": r.score, "is_null": r.is_null}

    def records(self, result: list[list[Answer]]) -> list[dict[str, Any]]:
        return [self.record(answers[0]) for answers in result]

    def arrow_types(self, pa: Any, labels: Any) -> dict[str, Any]:
        return {"answer": pa.string(), "start": pa.int64(), "end": pa.int64(), "score": pa.float64(),
                "is_null": pa.bool_()}


FAMILY = ExtractiveQAFamily()
