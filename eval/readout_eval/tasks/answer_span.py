"""answer_span (extractive QA): an answer span in the context, or no answer. Gold: ``answers`` in SQuAD form
``{"text": [...], "answer_start": [...]}`` (empty lists: unanswerable).

Exact match and F1 follow the official SQuAD v2.0 evaluation script: answers are normalized (lower
case, punctuation and the articles a/an/the removed, whitespace collapsed), F1 is token overlap, each
case takes its best gold answer, and a gold set with no non-empty answer is the empty answer, which only
the null prediction matches. Values are fractions (the script prints them x100).
"""
from __future__ import annotations

import collections
import math
import re
import string
from typing import Any, Sequence

import numpy as np

from readout_eval.data import Dataset, Row
from readout_eval.tasks.base import Case, Measured, Task, items_of, trace_slices

def normalize_answer(s: str) -> str:
    """The SQuAD script's normalization."""
    s = "".join(ch for ch in s.lower() if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s, flags=re.UNICODE)
    return " ".join(s.split())


def exact(gold: str, pred: str) -> float:
    return float(normalize_answer(gold) == normalize_answer(pred))


def f1(gold: str, pred: str) -> float:
    g = normalize_answer(gold).split() if gold else []
    p = normalize_answer(pred).split() if pred else []
    if not g or not p:
        return float(g == p)
    same = sum((collections.Counter(g) & collections.Counter(p)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def best(golds: list[str], pred: str) -> tuple[float, float]:
    """(exact match, F1) against the best gold answer ([''] when none is non-empty)."""
    golds = [a for a in golds if normalize_answer(a)] or [""]
    return max(exact(a, pred) for a in golds), max(f1(a, pred) for a in golds)


class AnswerSpan(Task):
    name = "answer_span"
    gold_fields = ("answers",)
    metric_names = ("exact_match", "f1", "no_answer_accuracy", "answerable_rate")
    case_value = "F1 of the case"
    correctness = "exact match (the null answer for an unanswerable case)"

    def gold(self, ds: Dataset, row: Row, engine: Any) -> list[str]:
        value = row.fields.get("answers")
        ok = isinstance(value, dict) and isinstance(value.get("text"), list) \
            and all(isinstance(a, str) for a in value["text"])
        if not ok:
            raise ds.fail(row, "'answers' must be {\"text\": [...], \"answer_start\": [...]} (empty lists: "
                               f"no answer), got {value!r}")
        starts = value.get("answer_start", [])
        context = row.fields.get("context")
        if not isinstance(context, str):
            raise ds.fail(row, "'context' must be a string")
        # the script scores texts only; starts, when given, must locate them (one per text)
        if not isinstance(starts, list) or (starts and len(starts) != len(value["text"])) or \
                not all(isinstance(a, int) and not isinstance(a, bool) for a in starts):
            raise ds.fail(row, "'answers.answer_start' must be a list of integers, one per answer text (or empty)")
        for text, start in zip(value["text"], starts):
            if context[start:start + len(text)] != text or start < 0:
                raise ds.fail(row, f"'answers': {text!r} is not at answer_start {start} of the context")
        return list(value["text"])

    def cases(self, engine: Any, ds: Dataset, golds: Sequence[list[str]]) -> list[Case]:
        fam, ctx = engine.family_spec, engine.context
        opts = fam.options(ctx)
        out = []
        for row, gold, t in zip(ds.rows, golds, engine.trace(items_of(engine, ds))):
            top = t.result[0]
            # the best span and the null score, whatever the decision: what the null-threshold fit reads
            spans, null_score = fam.scored(ctx, t.outs, t.parts, 1, opts["max_answer_length"], opts["align_to_words"])
            span = t.item[1][spans[0][1]:spans[0][2]] if spans else None
            em, f = best(gold, "" if top.is_null else top.text)
            answerable = bool(gold)  # as the official script's has-answer: the gold list is not empty
            margin = None if null_score is None else (null_score - spans[0][0] if spans else math.inf)
            out.append(Case(row.id, trace_slices(engine, row, t) + ["answerable" if answerable else "unanswerable"],
                            {"text": top.text, "start": top.start, "end": top.end, "is_null": top.is_null,
                             "score": top.score}, gold, bool(em), f,
                            {"em": em, "f1": f, "answerable": answerable, "null": top.is_null, "margin": margin,
                             "span_scores": best(gold, span) if span is not None else (0.0, 0.0)}))
        return out

    def measure(self, cases: Sequence[Case], engine: Any) -> Measured:
        n = len(cases)
        m = {"exact_match": float(np.mean([c.extra["em"] for c in cases])),
             "f1": float(np.mean([c.extra["f1"] for c in cases])),
             "no_answer_accuracy": float(np.mean([c.extra["null"] == (not c.extra["answerable"]) for c in cases])),
             "answerable_rate": float(np.mean([c.extra["answerable"] for c in cases]))}
        return Measured(m, {k: n for k in m}, {},
                        {"exact_match": "SQuAD v2.0 script's normalized exact match, best gold answer (fraction)",
                         "f1": "SQuAD v2.0 script's token-overlap F1, best gold answer (fraction)",
                         "no_answer_accuracy": "fraction of cases whose null / non-null prediction matches whether "
                                               "the gold has an answer"})


TASK = AnswerSpan()
