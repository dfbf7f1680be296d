"""relevance (embedding, cross-encoder, late interaction, sparse): the declared score of a query
against documents (`Family.relevance`).

A file holds one of two row kinds:
- ranking: ``{"query", "documents": [...], "relevant": [indices] | {"index": grade}}``. nDCG@10, MRR@10
  and recall@1/5/10 come from pytrec_eval (trec_eval's own rules, linear gain) over each query's fixed
  candidates; ties are ranked in input order (document ids are chosen so trec_eval's tie rule gives it);
- scored pairs: ``{"query", "document", "score"}`` (STS-style): Pearson and Spearman of the declared score
  against the gold score (scipy).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from readout_eval.data import Dataset, Row, number
from readout_eval.measures import correlations
from readout_eval.tasks.base import Case, Measured, Task, token_bucket

CUTOFFS = (1, 5, 10)
MAX_GRADE = 2 ** 31 - 1  # trec_eval reads grades as C ints
RANKING = {"ndcg@10": "trec_eval ndcg_cut.10 (linear gain, log2 discount), mean over queries",
           "mrr@10": "trec_eval recip_rank counted only when the first relevant document is in the top 10",
           **{f"recall@{k}": f"trec_eval recall.{k}: relevant documents in the top {k} / all relevant" for k in CUTOFFS}}


class Relevance(Task):
    name = "relevance"
    gold_fields = ("relevant", "score")
    metric_names = ("ndcg@10", "mrr@10", "recall@1", "recall@5", "recall@10", "pearson", "spearman")
    case_value = "nDCG@10 of the query (ranking rows) or the predicted score (pairs)"
    correctness = "the top-ranked document is relevant (ranking rows)"
    reads_items = False  # rows are a query with documents, scored by `Family.relevance`

    def gold(self, ds: Dataset, row: Row, engine: Any) -> Any:
        f = row.fields
        if not isinstance(f.get("query"), str) or not f["query"].strip():
            raise ds.fail(row, "'query' must be a non-empty string")
        if "documents" in f:
            docs = f["documents"]
            if not isinstance(docs, list) or not docs or not all(isinstance(d, str) and d.strip() for d in docs):
                raise ds.fail(row, "'documents' must be a non-empty list of non-empty strings")
            grades = _grades(f.get("relevant"), len(docs))
            if grades is None:
                raise ds.fail(row, "'relevant' must list the indices of relevant documents (or map \"index\" -> "
                                   f"grade 0..{MAX_GRADE}), with at least one relevant, got {str(f.get('relevant'))[:80]}")
            return {"kind": "ranking", "grades": grades}
        if not isinstance(f.get("document"), str) or not f["document"].strip():
            raise ds.fail(row, "a row needs 'documents' and 'relevant' (ranking) or 'document' and 'score' (pairs)")
        s = number(f.get("score"))
        if s is None:
            raise ds.fail(row, f"'score' must be a finite number, got {str(f.get('score'))[:40]}")
        return {"kind": "pair", "score": s}

    def cases(self, engine: Any, ds: Dataset, golds: Sequence[Any]) -> list[Case]:
        kinds = {g["kind"] for g in golds}
        if len(kinds) > 1:
            raise ds.fail(ds.rows[0], "mixes ranking rows and scored pairs; keep one kind per file")
        fam = engine.family_spec
        pairs = [(r.fields["query"], d) for r, g in zip(ds.rows, golds)
                 for d in (r.fields["documents"] if g["kind"] == "ranking" else [r.fields["document"]])]
        scores = iter(fam.relevance(engine, pairs).tolist())
        tok = engine.tokenizer
        out = []
        for row, gold in zip(ds.rows, golds):
            slices = [token_bucket(len(tok.encode(row.fields["query"]).ids))] + list(row.slices)
            if gold["kind"] == "pair":
                s = next(scores)
                out.append(Case(row.id, slices, s, gold["score"], None, s, {"kind": "pair"}))
                continue
            s = [next(scores) for _ in row.fields["documents"]]
            order = sorted(range(len(s)), key=lambda i: (-s[i], i))
            top1 = gold["grades"].get(order[0], 0) > 0
            out.append(Case(row.id, slices, order[:10], {str(k): v for k, v in gold["grades"].items()}, top1, None,
                            {"kind": "ranking", "scores": s, "grades": gold["grades"]}))
        if out and out[0].extra["kind"] == "ranking":
            per_query = trec(out)
            for c in out:
                c.extra["trec"] = per_query[c.id]
                c.value = per_query[c.id]["ndcg@10"]
        return out

    def measure(self, cases: Sequence[Case], engine: Any) -> Measured:
        n = len(cases)
        if cases[0].extra["kind"] == "pair":
            m = correlations([c.prediction for c in cases], [c.gold for c in cases])
            return Measured(m, {k: n for k in m}, {"score_type": engine.abi["output"]["score_type"]},
                            {"pearson": "Pearson r of the declared score and the gold score (scipy)",
                             "spearman": "Spearman rho of the declared score and the gold score (scipy)"})
        names = list(RANKING)
        m = {k: float(np.mean([c.extra["trec"][k] for c in cases])) for k in names}
        curve = {k: float(np.mean([_recall_at(c, k) for c in cases])) for k in range(1, 11)}
        return Measured(m, {k: n for k in m}, {"recall_curve": curve}, dict(RANKING))


def _grades(rel: Any, n: int) -> dict[int, int] | None:
    """Index -> grade from a list of indices (grade 1) or a {"index": grade} map, or None if malformed."""
    def index(k: Any) -> int | None:
        if isinstance(k, str) and k.isascii() and k.isdigit():
            k = int(k)
        return k if isinstance(k, int) and not isinstance(k, bool) and 0 <= k < n else None

    if isinstance(rel, list):
        pairs = [(index(k), 1) for k in rel]
    elif isinstance(rel, dict):
        pairs = [(index(k), g) for k, g in rel.items()]
    else:
        return None
    ok = pairs and all(i is not None and isinstance(g, int) and not isinstance(g, bool) and 0 <= g <= MAX_GRADE
                       for i, g in pairs)
    grades = dict(pairs) if ok else None
    return grades if grades and any(grades.values()) else None


def _doc_id(i: int) -> str:
    # trec_eval breaks score ties by document id, descending: a larger id for an earlier document keeps input order
    return f"d{999999 - i:06d}"


def trec(cases: Sequence[Case]) -> dict[str, dict[str, float]]:
    """Per query, the ranking metrics from pytrec_eval."""
    import pytrec_eval

    qrels = {c.id: {_doc_id(i): int(g) for i, g in c.extra["grades"].items()} for c in cases}
    run = {c.id: {_doc_id(i): float(s) for i, s in enumerate(c.extra["scores"])} for c in cases}
    measures = {"ndcg_cut.10", "recip_rank", f"recall.{','.join(map(str, CUTOFFS))}"}
    raw = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    out = {}
    for qid, r in raw.items():
        rr = r["recip_rank"]
        out[qid] = {"ndcg@10": r["ndcg_cut_10"], "mrr@10": rr if rr >= 0.1 else 0.0,
                    **{f"recall@{k}": r[f"recall_{k}"] for k in CUTOFFS}}
    return out


def _recall_at(case: Case, k: int) -> float:
    s, grades = case.extra["scores"], case.extra["grades"]
    order = sorted(range(len(s)), key=lambda i: (-s[i], i))[:k]
    relevant = [i for i, g in grades.items() if g > 0]
    return sum(1 for i in order if grades.get(i, 0) > 0) / len(relevant)


TASK = Relevance()
