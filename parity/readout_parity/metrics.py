"""Metrics by family. Each compares compiled outputs with the eager reference, item by item; decisions
are compared by label name, never by index."""
from __future__ import annotations

from typing import Any

import numpy as np

from readout_sdk.decode.scores import apply, sigmoid
from readout_sdk.decode.spans import best_spans, window_probabilities
from readout_sdk.decode.tagging import decode_entities, pieces


def _ranks(x: np.ndarray) -> np.ndarray:
    return np.argsort(np.argsort(x, kind="stable"), kind="stable").astype(np.float64)


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman rank correlation (no tie averaging: ties are broken by position, the same on both sides)."""
    ra, rb = _ranks(a), _ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return 1.0 if np.array_equal(ra, rb) else 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


def raw_errors(got: list[dict], ref: list[dict]) -> dict[str, float]:
    """Max and mean absolute error and max relative error over every output value."""
    diffs, rels = [], []
    for g, r in zip(got, ref):
        for name, rv in r.items():
            if rv.dtype.kind != "f":
                continue
            d = np.abs(g[name].astype(np.float64) - rv)
            diffs.append(d.ravel())
            rels.append((d / np.maximum(np.abs(rv), 1e-6)).ravel())
    d, rel = np.concatenate(diffs), np.concatenate(rels)
    return {"max_abs_error": float(d.max()), "mean_abs_error": float(d.mean()), "max_rel_error": float(rel.max())}


def embedding_metrics(got: list[dict], ref: list[dict], k: int = 10) -> dict[str, float]:
    g = np.stack([x["embeddings"] for x in got]).astype(np.float64)
    r = np.stack([x["embeddings"] for x in ref]).astype(np.float64)
    gn = g / np.linalg.norm(g, axis=1, keepdims=True)
    rn = r / np.linalg.norm(r, axis=1, keepdims=True)
    cos = (gn * rn).sum(1)
    sg, sr = gn @ gn.T, rn @ rn.T
    n = len(g)
    k = min(k, n - 1)
    overlaps, corr = [], []
    for i in range(n):
        others = [j for j in range(n) if j != i]
        top_g = set(np.array(others)[np.argsort(-sg[i, others], kind="stable")[:k]])
        top_r = set(np.array(others)[np.argsort(-sr[i, others], kind="stable")[:k]])
        overlaps.append(len(top_g & top_r) / max(k, 1))
        corr.append(spearman(sg[i, others], sr[i, others]))
    return {"min_cosine": float(cos.min()), "mean_cosine": float(cos.mean()),
            "knn10_overlap": float(np.mean(overlaps)), "rank_correlation": float(np.mean(corr))}


def label_metrics(got: list[dict], ref: list[dict], labels: list[str], key: str = "logits") -> dict[str, float]:
    arg = [labels[int(np.argmax(g[key]))] == labels[int(np.argmax(r[key]))] for g, r in zip(got, ref)]
    k = min(2, len(labels))
    top = [{labels[i] for i in np.argsort(-g[key], kind="stable")[:k]} ==
           {labels[i] for i in np.argsort(-r[key], kind="stable")[:k]} for g, r in zip(got, ref)]
    return {"argmax_agreement": float(np.mean(arg)), "topk_agreement": float(np.mean(top))}


def multilabel_metrics(got: list[dict], ref: list[dict], thresholds: list[float]) -> dict[str, float]:
    th = np.array(thresholds)
    agree = [np.mean((sigmoid(g["logits"]) >= th) == (sigmoid(r["logits"]) >= th)) for g, r in zip(got, ref)]
    return {"decision_agreement": float(np.mean(agree))}


def entity_metrics(got: list[dict], ref: list[dict], items: list[str], encs: list[Any], labels: list[str],
                   unk: int | None, prefix: str | None) -> dict[str, float]:
    same = []
    for g, r, text, enc in zip(got, ref, items, encs):
        e = [enc.offsets, enc.special_tokens_mask, enc.ids, enc.tokens, unk, prefix]
        a = decode_entities(text, pieces(text, _softmax(g["token_logits"]), *e), labels, "simple")
        b = decode_entities(text, pieces(text, _softmax(r["token_logits"]), *e), labels, "simple")
        same.append([(x.label, x.start, x.end) for x in a] == [(x.label, x.start, x.end) for x in b])
    return {"entity_agreement": float(np.mean(same))}


def _softmax(x: np.ndarray) -> np.ndarray:
    return apply("softmax", x)


def span_metrics(got: list[dict], ref: list[dict], encs: list[Any]) -> dict[str, float]:
    same = []
    for g, r, enc in zip(got, ref, encs):
        ctx = np.array([s == 1 for s in enc.sequence_ids])
        spans = []
        for out in (g, r):
            p_s, p_e = window_probabilities(out["start_logits"], out["end_logits"], ctx, 0)
            best = best_spans(p_s, p_e, ctx, 30, 1)
            spans.append(best[0][1:] if best else None)
        same.append(spans[0] == spans[1])
    return {"span_agreement": float(np.mean(same))}


def cross_metrics(got: list[dict], ref: list[dict], score_type: str) -> dict[str, float]:
    g = np.array([apply(score_type, x["logits"])[-1] for x in got])
    r = np.array([apply(score_type, x["logits"])[-1] for x in ref])
    k = min(3, len(g))
    top = set(np.argsort(-g, kind="stable")[:k]) == set(np.argsort(-r, kind="stable")[:k])
    return {"rank_correlation": spearman(g, r), "topk_agreement": float(top)}


def maxsim_metrics(got: list[dict], ref: list[dict]) -> dict[str, float]:
    def rows(x):
        return x["token_vectors"][x["token_mask"].astype(bool)].astype(np.float64)
    worst = 0.0
    for i in range(min(8, len(got))):
        for j in range(len(got)):
            a = (rows(got[i]) @ rows(got[j]).T).max(1).sum()
            b = (rows(ref[i]) @ rows(ref[j]).T).max(1).sum()
            worst = max(worst, abs(a - b))
    return {"maxsim_error": float(worst)}


def term_metrics(got: list[dict], ref: list[dict], k: int = 10) -> dict[str, float]:
    overlap = []
    for g, r in zip(got, ref):
        a = set(np.argsort(-g["sparse_weights"], kind="stable")[:k])
        b = set(np.argsort(-r["sparse_weights"], kind="stable")[:k])
        overlap.append(len(a & b) / k)
    return {"term_overlap": float(np.mean(overlap))}


def family_metrics(record: dict, got: list[dict], ref: list[dict], items: list[Any], encs: list[Any],
                   prefix: str | None) -> dict[str, float]:
    """Every metric of the record's family (raw errors included)."""
    family, out = record["family"], record["output"]
    labels = list(out.get("labels") or [])
    m = raw_errors(got, ref)
    if family == "embedding":
        m |= embedding_metrics(got, ref)
    elif family in ("sequence_classification",):
        m |= label_metrics(got, ref, labels)
    elif family == "multiple_choice":
        n = len(got[0]["logits"])
        m |= label_metrics(got, ref, [f"choice {i}" for i in range(n)])
    elif family == "multilabel_classification":
        m |= multilabel_metrics(got, ref, out["thresholds"])
    elif family == "token_classification":
        m |= entity_metrics(got, ref, items, encs, labels, record["input"]["special_token_ids"].get("unk"), prefix)
    elif family == "extractive_qa":
        m |= span_metrics(got, ref, encs)
    elif family == "cross_encoder":
        m |= cross_metrics(got, ref, out["score_type"])
        if len(labels) > 1:
            m |= label_metrics(got, ref, labels)
    elif family == "late_interaction":
        m |= maxsim_metrics(got, ref)
    elif family == "sparse":
        m |= term_metrics(got, ref)
    return m
