"""`readout_eval` metrics against independent oracles: scikit-learn, scipy / numpy, seqeval, the
official SQuAD v2.0 script's scoring (tests/helpers/squad_v2_official.py) and hand formulas, each fed the SDK's own
direct-call predictions (classify, choose, tag, answer, embed, score_pairs, sparse_encode, encode_tokens)
and the gold written to the data file. Every evaluate() runs with keep=False: the shared artifacts stay as
built. Weights are random except MiniLM and SPLADE, so the checks are of the arithmetic, not the models."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import rankdata
from sklearn.metrics import (accuracy_score, average_precision_score, confusion_matrix, f1_score, log_loss,
                             ndcg_score, precision_recall_fscore_support)

import readout_sdk
from helpers.corpus import CHOICES, PAIRS, TEXTS
from readout_sdk.engine import Engine
from readout_eval import gates as G
from readout_eval.measures import ece as sdk_ece
from readout_eval.paired import compare
from readout_eval.run import evaluate
from readout_eval.slices import Slice
from readout_eval.tasks import TASKS, Case, Measured
from helpers.squad_v2_official import best_scores, compute_exact, compute_f1, normalize_answer

TOL = 1e-6  # metric values computed from the same probabilities by two routes

SENTIMENT = ["negative", "neutral", "positive"]
EXTRA_TEXTS = [
    "I loved every minute of this film.", "The service was slow and the food was cold.",
    "It is an ordinary Tuesday.", "Absolutely wonderful experience, would return!", "Terrible. Never again.",
    "The package arrived on time.", "Meh.", "What a fantastic surprise that was",
    "The hotel room smelled of smoke and the staff were rude to us.", "Numbers went up, then down.",
    "Best purchase I have made this year", "It rained all day in the valley.", "okay I guess",
    " ".join([PAIRS[-1][1]] * 2),  # longer than 32 tokens
]
CLASSIFY_TEXTS = list(TEXTS) + EXTRA_TEXTS


# ---- helpers ------------------------------------------------------------------------------------------------
def write_rows(tmp_path, rows, name="data.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def run_eval(artifact, tmp_path, rows, name="data.jsonl", **kw):
    kw.setdefault("role", "development")
    return evaluate(artifact, write_rows(tmp_path, rows, name), keep=False, **kw)


def close(a, b, tol=TOL):
    return a is not None and b is not None and abs(float(a) - float(b)) <= tol


def spec_ece(conf, correct, bins=15):
    """The spec's ECE, written out: bin k = (k/15, (k+1)/15], the first bin [0, 1/15]."""
    conf, correct = np.asarray(conf, float), np.asarray(correct, float)
    total = 0.0
    for k in range(bins):
        lo, hi = k / bins, (k + 1) / bins
        inside = (conf >= lo) & (conf <= hi) if k == 0 else (conf > lo) & (conf <= hi)
        if inside.any():
            total += inside.sum() / len(conf) * abs(correct[inside].mean() - conf[inside].mean())
    return total


def token_bucket_of(n):
    for low, high in ((1, 32), (33, 128), (129, 512)):
        if low <= n <= high:
            return f"tokens:{low}-{high}"
    return "tokens:>512"


def classify_rows():
    """Gold cycles over the three labels; slices odd/even, and one row in 'extra' too."""
    rows = []
    for i, text in enumerate(CLASSIFY_TEXTS):
        sl = ["odd" if i % 2 else "even"] + (["extra"] if i in (3, 4, 5, 20) else [])
        rows.append({"id": f"c{i}", "text": text, "label": SENTIMENT[(i * 7) % 3], "slice": sl})
    return rows


def classify_oracle(engine, rows):
    """(gold indices, predicted indices, probabilities [n, 3]) from engine.classify."""
    got = engine.classify([r["text"] for r in rows], top_k=3)
    probs = np.array([[g.scores[lab] for lab in SENTIMENT] for g in got])
    y = np.array([SENTIMENT.index(r["label"]) for r in rows])
    p = np.array([SENTIMENT.index(g.label) for g in got])
    return y, p, probs


# ---- 1. single label ----------------------------------------------------------------------------------------
def test_single_label_metrics_match_sklearn(shared, tmp_path):
    """accuracy / macro & micro F1 / per-class P R F1 support / confusion matrix vs scikit-learn; nll vs
    log_loss; brier vs sum_c (p - y)^2 averaged; ece vs the spec's binning; the artifact is left untouched."""
    _, art = shared("classify")
    before = (art / "readout.json").read_bytes()
    rows = classify_rows()
    doc = run_eval(art, tmp_path, rows)
    engine = readout_sdk.load(art)
    y, p, probs = classify_oracle(engine, rows)
    m = doc["metrics"]
    assert doc["task"] == "single_label" and len(doc["cases"]) == len(rows)
    assert [c["prediction"]["label"] for c in doc["cases"]] == [SENTIMENT[k] for k in p]
    assert [c["correct"] for c in doc["cases"]] == list(p == y)
    assert m["accuracy"] == pytest.approx(accuracy_score(y, p), abs=1e-12)
    assert m["macro_f1"] == pytest.approx(f1_score(y, p, average="macro", zero_division=0), abs=1e-12)
    assert m["micro_f1"] == pytest.approx(f1_score(y, p, average="micro", zero_division=0), abs=1e-12)
    assert m["micro_f1"] == pytest.approx(m["accuracy"], abs=1e-12)
    prec, rec, f1, sup = precision_recall_fscore_support(y, p, labels=[0, 1, 2], zero_division=0)
    for j, lab in enumerate(SENTIMENT):
        pc = doc["per_class"][lab]
        assert (pc["precision"], pc["recall"], pc["f1"], pc["support"]) == pytest.approx(
            (prec[j], rec[j], f1[j], sup[j]), abs=1e-12), lab
    assert doc["confusion_matrix"]["labels"] == SENTIMENT
    assert doc["confusion_matrix"]["counts"] == confusion_matrix(y, p, labels=[0, 1, 2]).tolist()
    assert close(m["nll"], log_loss(y, probs, labels=[0, 1, 2]))
    assert close(m["nll"], -np.mean(np.log(probs[np.arange(len(y)), y])))
    onehot = np.eye(3)[y]
    assert close(m["brier"], np.mean(((probs - onehot) ** 2).sum(1)))
    assert close(m["ece"], spec_ece(probs.max(1), p == y))
    assert all(doc["support"][k] == len(rows) for k in ("accuracy", "macro_f1", "nll", "brier", "ece"))
    assert (art / "readout.json").read_bytes() == before and not (art / "evaluation.json").exists()
    engine.close()


def _case(i, gold, pred, conf, classes):
    k = len(classes)
    probs = np.full(k, (1.0 - conf) / (k - 1))
    probs[pred] = conf
    return Case(f"x{i}", [], {"label": classes[pred], "score": conf, "abstained": False}, classes[gold],
                pred == gold, float(pred == gold),
                {"probs": probs, "raw_probs": probs, "gold": gold, "pred": pred, "abstained": False,
                 "classes": classes, "outs": []})


class _Stub:
    abi = {"output": {}}


def test_single_label_spec_fixture_six_examples():
    """The spec's fixture: class F1s 1.0, 0.5, 0.5 -> macro F1 2/3, micro F1 = accuracy = 4/6 (hand values);
    nll / brier / ece of the same cases vs log_loss, the hand Brier formula and the spec's ECE."""
    classes = ["A", "B", "C"]
    gold = [0, 0, 1, 1, 2, 2]
    pred = [0, 0, 1, 2, 1, 2]
    conf = [0.9, 0.8, 0.6, 0.55, 0.95, 0.4]
    cases = [_case(i, g, p, c, classes) for i, (g, p, c) in enumerate(zip(gold, pred, conf))]
    out = TASKS["single_label"].measure(cases, _Stub())
    m = out.metrics
    assert [out.detail["per_class"][c]["f1"] for c in classes] == pytest.approx([1.0, 0.5, 0.5])
    assert m["macro_f1"] == pytest.approx(2 / 3)
    assert m["micro_f1"] == pytest.approx(4 / 6) and m["accuracy"] == pytest.approx(4 / 6)
    probs = np.stack([c.extra["probs"] for c in cases])
    assert m["nll"] == pytest.approx(log_loss(gold, probs, labels=[0, 1, 2]))
    assert m["brier"] == pytest.approx(np.mean(((probs - np.eye(3)[gold]) ** 2).sum(1)))
    assert m["ece"] == pytest.approx(spec_ece(conf, np.array(gold) == np.array(pred)))
    assert out.detail["confusion_matrix"]["counts"] == [[2, 0, 0], [0, 1, 1], [0, 1, 1]]
    assert "coverage" not in m  # no abstention declared


def test_ece_bin_edges_follow_the_definition():
    """measures.ece vs the spec's binning on confidences exactly at bin edges (lower edge exclusive), at 0
    and at 1, and spread over every bin."""
    from readout_eval.measures import reliability

    edges = [k / 15 for k in range(16)]
    correct = [k % 3 == 0 for k in range(16)]
    assert sdk_ece(edges, correct) == pytest.approx(spec_ece(edges, correct), abs=1e-12)
    assert [b["count"] for b in reliability(edges, correct)] == [2] + [1] * 14  # 0 and 1/15 share bin 1
    # 0.1 and 2/15 share the bin (1/15, 2/15]: one bin, accuracy 1/2 (hand value)
    assert sdk_ece([0.1, 2 / 15], [True, False]) == pytest.approx(0.5 - (0.1 + 2 / 15) / 2, abs=1e-12)
    rng = np.random.default_rng(0)
    conf = np.concatenate([rng.uniform(0, 1, 200), edges])
    hit = rng.uniform(0, 1, len(conf)) < conf
    assert sdk_ece(conf, hit) == pytest.approx(spec_ece(conf, hit), abs=1e-12)
    assert sdk_ece([], []) is None


# ---- 2. multiple choice -------------------------------------------------------------------------------------
def test_multiple_choice_accuracy_matches_choose(shared, tmp_path):
    """accuracy and per-case predictions vs engine.choose (questions with 2, 3 and 4 choices)."""
    _, art = shared("choice")
    items = list(CHOICES) + [("Two sides of a coin:", ["heads", "tails"]),
                             ("Pick a season", ["spring", "summer", "autumn", "winter"])]
    rows = [{"id": f"q{i}", "question": q, "choices": list(c), "label": i % len(c)} for i, (q, c) in enumerate(items)]
    doc = run_eval(art, tmp_path, rows)
    engine = readout_sdk.load(art)
    chosen = [engine.choose(q, c).index for q, c in items]
    gold = [r["label"] for r in rows]
    assert [c["prediction"]["label"] for c in doc["cases"]] == [f"choice {k}" for k in chosen]
    assert doc["metrics"]["accuracy"] == pytest.approx(np.mean(np.array(chosen) == np.array(gold)), abs=1e-12)
    assert doc["confusion_matrix"]["counts"] == confusion_matrix(gold, chosen, labels=[0, 1, 2, 3]).tolist()
    # the length bucket of a question is its longest (question, choice) encoding
    buckets = [token_bucket_of(max(len(engine.tokenizer.encode(q, x).ids) for x in c)) for q, c in items]
    assert [c["slices"][0] for c in doc["cases"]] == buckets
    engine.close()


# ---- 3. multilabel ------------------------------------------------------------------------------------------
def test_multilabel_metrics_match_sklearn(shared, tmp_path):
    """per-label P R F1 support, macro/micro F1 vs scikit-learn on engine.classify's label sets; average
    precision = mean of average_precision_score over labels with a gold positive ('urgent' has none);
    labels_per_example and empty_prediction_rate by hand."""
    _, art = shared("multilabel")
    labels = ["toxic", "spam", "urgent"]
    texts = CLASSIFY_TEXTS[:16]
    golds = [[["toxic"], ["spam"], ["toxic", "spam"], []][i % 4] for i in range(len(texts))]
    rows = [{"text": t, "labels": g} for t, g in zip(texts, golds)]
    doc = run_eval(art, tmp_path, rows)
    got = readout_sdk.load(art).classify(texts)
    y = np.array([[lab in g for lab in labels] for g in golds], int)
    yhat = np.array([[lab in r.labels for lab in labels] for r in got], int)
    scores = np.array([[r.scores[lab] for lab in labels] for r in got])
    m = doc["metrics"]
    assert [c["prediction"] for c in doc["cases"]] == [list(r.labels) for r in got]
    prec, rec, f1, sup = precision_recall_fscore_support(y, yhat, average=None, zero_division=0)
    for j, lab in enumerate(labels):
        pl = doc["per_label"][lab]
        assert (pl["precision"], pl["recall"], pl["f1"], pl["support"]) == pytest.approx(
            (prec[j], rec[j], f1[j], sup[j]), abs=1e-12), lab
    assert doc["per_label"]["urgent"]["average_precision"] is None
    assert [doc["per_label"][lab]["threshold"] for lab in labels] == pytest.approx([0.5, 0.45, 0.55])
    assert m["macro_f1"] == pytest.approx(f1_score(y, yhat, average="macro", zero_division=0), abs=1e-12)
    assert m["micro_f1"] == pytest.approx(f1_score(y, yhat, average="micro", zero_division=0), abs=1e-12)
    ap = [average_precision_score(y[:, j], scores[:, j]) for j in range(3) if y[:, j].any()]
    assert len(ap) == 2 and doc["support"]["average_precision"] == 2
    assert close(m["average_precision"], np.mean(ap))
    assert m["labels_per_example"] == pytest.approx(yhat.sum(1).mean(), abs=1e-12)
    assert m["empty_prediction_rate"] == pytest.approx(np.mean(yhat.sum(1) == 0), abs=1e-12)
    assert m["exact_set_accuracy"] == pytest.approx(np.mean((y == yhat).all(1)), abs=1e-12)


# ---- 4. regression ------------------------------------------------------------------------------------------
def _pearson(a, b):
    return float(np.corrcoef(a, b)[0, 1])


def test_regression_metrics_match_numpy(shared, tmp_path):
    """mae / rmse / Pearson / Spearman per output vs numpy (Spearman = Pearson of rankdata ranks), averaged
    over outputs; rows omitting 'arousal' lower its support."""
    _, art = shared("regression")
    texts = CLASSIFY_TEXTS[:14]
    rows = []
    for i, t in enumerate(texts):
        values = {"valence": round(math.sin(i) * 2, 3), "arousal": round(math.cos(1.3 * i), 3)}
        if i in (2, 7, 11):
            del values["arousal"]
        rows.append({"text": t, "values": values})
    doc = run_eval(art, tmp_path, rows)
    got = readout_sdk.load(art).classify(texts)
    want = {}
    for name in ("valence", "arousal"):
        have = [i for i, r in enumerate(rows) if name in r["values"]]
        g = np.array([rows[i]["values"][name] for i in have])
        p = np.array([got[i].values[name] for i in have])
        want[name] = {"support": len(have), "mae": np.mean(np.abs(p - g)), "rmse": np.sqrt(np.mean((p - g) ** 2)),
                      "pearson": _pearson(p, g), "spearman": _pearson(rankdata(p), rankdata(g))}
        po = doc["per_output"][name]
        assert po["support"] == len(have)
        for k in ("mae", "rmse", "pearson", "spearman"):
            assert close(po[k], want[name][k]), (name, k, po[k], want[name][k])
    assert doc["per_output"]["valence"]["support"] == 14 and doc["per_output"]["arousal"]["support"] == 11
    for k in ("mae", "rmse", "pearson", "spearman"):
        assert close(doc["metrics"][k], np.mean([want[n][k] for n in want])), k
        assert doc["support"][k] == 11
    for c, r, g in zip(doc["cases"], rows, got):
        assert close(c["value"], np.mean([abs(g.values[k] - v) for k, v in r["values"].items()]))


# ---- 5. token classification --------------------------------------------------------------------------------
def _span(text, word, label, after=0):
    start = text.index(word, after)
    return {"start": start, "end": start + len(word), "label": label}


TAG_GOLD = [
    ("Ada Lovelace lived in London", [("Ada Lovelace", "PER"), ("London", "LOC")]),
    ("Paris and Berlin are large cities", [("Paris", "LOC"), ("Berlin", "LOC")]),
    ("Marie Curie worked in Warsaw and Paris", [("Marie Curie", "PER"), ("Warsaw", "LOC"), ("Paris", "LOC")]),
    ("nothing to see here", []),
    ("naïve café in Zürich", [("Zürich", "LOC")]),
    ("Grace Hopper and John Backus met in New York", [("Grace Hopper", "PER"), ("John Backus", "PER"),
                                                       ("New York", "LOC")]),
    ("x", []),
]


def _token_tags(engine, text, gold):
    """(predicted tags, gold tags) per non-special token: argmax of raw logits; B-/I- from the gold spans."""
    labels = list(engine.labels)
    enc = engine.tokenizer.encode(text)
    logits = engine.raw_outputs([text])[0][0]["token_logits"]
    keep = [k for k, s in enumerate(enc.special_tokens_mask) if not s]
    pred = [labels[int(np.argmax(logits[k]))] for k in keep]
    offsets = [enc.offsets[k] for k in keep]
    want = ["O"] * len(keep)
    for e in gold:
        inside = [j for j, (s, t) in enumerate(offsets) if s >= e["start"] and t <= e["end"] and t > s]
        for n, j in enumerate(inside):
            want[j] = ("B-" if n == 0 else "I-") + e["label"]
    return pred, want


def test_entity_metrics_match_seqeval(shared, tmp_path):
    """entity P/R/F1 (overall and per type) vs seqeval (default mode) on token BIO sequences; token_accuracy
    and illegal_transitions by own count; per-case predictions vs engine.tag. Some rows take one of the
    SDK's own predicted entities as gold so that true positives occur."""
    from seqeval.metrics import classification_report, f1_score as sq_f1, precision_score, recall_score

    _, art = shared("tag-bert")
    engine = readout_sdk.load(art)
    rows = []
    for text, spans in TAG_GOLD:
        rows.append({"text": text, "entities": [_span(text, w, lab) for w, lab in spans]})
    for text in ("The cat sat on the mat.", "Paris is the capital of France, and Berlin is the capital of Germany.",
                 "hello 🤗 world from Paris"):
        pred = engine.tag([text])[0]
        first = pred[0]
        gold = [{"start": first.start, "end": first.end, "label": first.label}]
        if "Paris" in text and text.index("Paris") >= first.end:
            gold.append(_span(text, "Paris", "LOC", first.end))
        rows.append({"text": text, "entities": gold})
    doc = run_eval(art, tmp_path, rows)
    tagged = engine.tag([r["text"] for r in rows])
    assert [c["prediction"] for c in doc["cases"]] == \
        [sorted([e.start, e.end, e.label] for e in t) for t in tagged]
    seq_pred, seq_gold = [], []
    for r in rows:
        p, g = _token_tags(engine, r["text"], r["entities"])
        seq_pred.append(p)
        seq_gold.append(g)
    m = doc["metrics"]
    assert m["entity_precision"] == pytest.approx(precision_score(seq_gold, seq_pred), abs=1e-12)
    assert m["entity_recall"] == pytest.approx(recall_score(seq_gold, seq_pred), abs=1e-12)
    assert m["entity_f1"] == pytest.approx(sq_f1(seq_gold, seq_pred), abs=1e-12)
    assert 0 < m["entity_recall"] < 1
    report = classification_report(seq_gold, seq_pred, output_dict=True, zero_division=0)
    for typ in ("PER", "LOC"):
        pt, rt = doc["per_type"][typ], report[typ]
        assert (pt["precision"], pt["recall"], pt["f1"], pt["support"]) == pytest.approx(
            (rt["precision"], rt["recall"], rt["f1-score"], rt["support"]), abs=1e-12), typ
    flat = [(a, b) for p, g in zip(seq_pred, seq_gold) for a, b in zip(p, g)]
    assert doc["support"]["token_accuracy"] == len(flat)
    assert m["token_accuracy"] == pytest.approx(np.mean([a == b for a, b in flat]), abs=1e-12)
    illegal = 0
    for tags in seq_pred:
        prev = "O"
        for tag in tags:
            if tag.startswith("I-") and prev not in ("B-" + tag[2:], "I-" + tag[2:]):
                illegal += 1
            prev = tag
    assert m["illegal_transitions"] == illegal
    engine.close()


# ---- 6. extractive QA ---------------------------------------------------------------------------------------
QA = [
    ("Who wrote the report?", "The report was written by Ada Lovelace in London in 1843.",
     ["Ada Lovelace", "Lovelace", "by Ada Lovelace"]),
    ("Where is the Eiffel Tower?", "The Eiffel Tower stands in Paris, the capital of France.", ["Paris"]),
    ("What changes outputs?", "Left padding with unshifted absolute positions changes BERT outputs.",
     ["Left padding", "padding"]),
    ("Why?", "Because shape is not meaning.", []),
    ("How long is the river?", "The river runs for about 300 kilometres before it reaches the sea.",
     ["about 300 kilometres"]),
    ("Who won the cup in 1990?", "The cat sat on the mat.", []),
    ("What colour is the mat?", "The cat sat on the mat.", []),
    ("What is exported?", "The graph with its readout: pooling, projection, normalization and the head.",
     ["The graph with its readout", "graph"]),
]


def test_extractive_qa_matches_official_squad_v2_scoring(shared, tmp_path):
    """exact_match / f1 vs the official SQuAD v2.0 script's compute_exact / compute_f1 (max over golds,
    [''] when unanswerable) on engine.answer's text ('' when is_null); no_answer_accuracy by hand; the
    answerable / unanswerable slices' support and metrics recomputed on each subset."""
    _, art = shared("qa-null")
    engine = readout_sdk.load(art)
    rows = []
    for i, (q, c, answers) in enumerate(QA):
        rows.append({"id": f"a{i}", "question": q, "context": c,
                     "answers": {"text": answers, "answer_start": [c.index(a) for a in answers]}})
    # two rows whose gold is built around the SDK's own answer: an exact hit and a partial overlap
    own = [(q, c, a) for q, c in PAIRS for a in [engine.answer(q, c)]
           if not a.is_null and normalize_answer(a.text)][:2]
    assert len(own) == 2
    for i, (q, c, a) in enumerate(own):
        rows.append({"id": f"own{i}", "question": q, "context": c,
                     "answers": {"text": [a.text] if i == 0 else [a.text + " and more words"],
                                 "answer_start": [a.start] if i == 0 else []}})
    doc = run_eval(art, tmp_path, rows)
    preds = [engine.answer(r["question"], r["context"]) for r in rows]
    texts = ["" if a.is_null else a.text for a in preds]
    scores = [best_scores(r["answers"]["text"], t) for r, t in zip(rows, texts)]
    em, f1 = np.array([s[0] for s in scores], float), np.array([s[1] for s in scores], float)
    for c, a, (e, f) in zip(doc["cases"], preds, scores):
        assert (c["prediction"]["text"], c["prediction"]["is_null"]) == (a.text, a.is_null), c["id"]
        assert c["correct"] == bool(e) and close(c["value"], f), c["id"]
    m = doc["metrics"]
    assert m["exact_match"] == pytest.approx(em.mean(), abs=1e-12)
    assert m["f1"] == pytest.approx(f1.mean(), abs=1e-12)
    assert em[-2] == 1 and 0 < f1[-1] < 1  # the rows built around the SDK's answers score as intended
    answerable = np.array([bool(r["answers"]["text"]) for r in rows])
    buckets = [token_bucket_of(len(engine.tokenizer.encode(r["question"], r["context"]).ids)) for r in rows]
    assert [c["slices"] for c in doc["cases"]] == [[b, "answerable" if a else "unanswerable"]
                                                   for b, a in zip(buckets, answerable)]
    null = np.array([a.is_null for a in preds])
    assert m["no_answer_accuracy"] == pytest.approx(np.mean(null == ~answerable), abs=1e-12)
    assert m["answerable_rate"] == pytest.approx(answerable.mean(), abs=1e-12)
    by_name = {s["name"]: s for s in doc["slices"]}
    for name, mask in (("answerable", answerable), ("unanswerable", ~answerable)):
        s = by_name[name]
        assert s["support"] == int(mask.sum())
        assert s["metrics"]["exact_match"] == pytest.approx(em[mask].mean(), abs=1e-12)
        assert s["metrics"]["f1"] == pytest.approx(f1[mask].mean(), abs=1e-12)
    engine.close()


def test_squad_normalization_matches_official_script():
    """answer_span.best vs the official script on articles, punctuation, case, whitespace, empty golds."""
    from readout_eval.tasks.answer_span import best

    cases = [(["The Eiffel Tower"], "eiffel tower!"), (["Ada Lovelace", "Lovelace"], "by Ada"),
             (["a cat", "the cat"], "An  cat."), ([], ""), ([], "something"), (["", "  "], ""),
             (["..."], "x"), (["New York City"], "york new"), (["the the the"], "the"), (["3.14"], "314"),
             (["Zürich"], "zürich"), (["rock 'n' roll"], "rock n roll"), (["one two two"], "two two one three"),
             (["a b c"], "b c d")]
    for golds, pred in cases:
        e, f = best(golds, pred)
        want = best_scores(golds, pred)
        assert (e, f) == pytest.approx(want, abs=1e-12), (golds, pred)
    assert compute_exact("The Cat", "cat") == 1 and compute_f1("x b c", "b c d") == pytest.approx(2 / 3)


# ---- 7. ranking and scored pairs with REAL MiniLM -----------------------------------------------------------
RANKING = [
    ("How do I bake sourdough bread at home?",
     ["The stock market fell sharply after the interest rate announcement.",
      "Sourdough bread needs an active starter, flour, water and a long fermentation before baking.",
      "Penguins live mostly in the Southern Hemisphere.",
      "Baking bread in a preheated Dutch oven at home gives it a crisp crust.",
      "The football team won the championship last night."], {"1": 2, "3": 1}),
    ("What is the capital of France?",
     ["Paris is the capital and largest city of France.", "Guitars usually have six strings.",
      "Photosynthesis converts sunlight into chemical energy.", "The Eiffel Tower is a landmark in Paris.",
      "Berlin is the capital of Germany."], {"0": 2, "3": 1}),
    ("What are the symptoms of the flu?",
     ["The train to Edinburgh leaves at noon.", "Volcanoes erupt when magma reaches the surface.",
      "My laptop battery drains too quickly.", "Chess is a strategy board game for two players.",
      "Influenza commonly causes fever, cough, sore throat and body aches."], [4]),
    ("How do I change a flat tire on my car?",
     ["Tomatoes grow best in warm, sunny weather.",
      "Loosen the lug nuts, jack up the car and replace the flat tire with the spare wheel.",
      "The orchestra played a symphony by Beethoven.", "Whales are the largest mammals in the ocean.",
      "Knitting a scarf takes patience."], [1]),
    ("Which programming language is popular for data science?",
     ["The mountain trail was covered in snow.", "She painted the kitchen walls yellow.",
      "Python is widely used for data science thanks to pandas and scikit-learn.",
      "Our flight was delayed by two hours.", "Honey never spoils if stored properly."], [2]),
    ("Why is the sky blue?",
     ["Rayleigh scattering of sunlight by air molecules makes the sky look blue.",
      "Cheese is made by curdling milk.", "The novel was translated into twelve languages.",
      "Elephants have excellent memories.", "The sky appears blue because air scatters short blue wavelengths."],
     {"0": 1, "4": 1}),
]

STS = [("A man is playing a guitar.", "A man plays the guitar.", 4.8),
       ("A woman is slicing an onion.", "Someone is cutting an onion.", 4.2),
       ("A dog runs in the park.", "A cat sleeps on the sofa.", 0.9),
       ("The stock market crashed today.", "Share prices fell sharply today.", 3.9),
       ("Kids are playing football.", "Children play soccer outside.", 3.5),
       ("The weather is sunny.", "I bought a new phone.", 0.1),
       ("He is reading a book.", "A man reads a novel.", 3.1),
       ("A plane is taking off.", "An airplane departs from the runway.", 4.4)]


def _grades(rel):
    return {int(k): v for k, v in rel.items()} if isinstance(rel, dict) else {i: 1 for i in rel}


def _ranking_oracle(scores, grades):
    """Per query: (order best first, ties in input order; ndcg@10 own formula; mrr@10; recall@1, 5, 10)."""
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    gains = [grades.get(i, 0) for i in order]
    dcg = sum(g / math.log2(r + 2) for r, g in enumerate(gains[:10]))
    ideal = sorted(grades.values(), reverse=True)
    idcg = sum(g / math.log2(r + 2) for r, g in enumerate(ideal[:10]))
    first = next((r for r, g in enumerate(gains) if g > 0), None)
    mrr = 1.0 / (first + 1) if first is not None and first < 10 else 0.0
    n_rel = sum(1 for g in grades.values() if g > 0)
    recall = {k: sum(1 for g in gains[:k] if g > 0) / n_rel for k in (1, 5, 10)}
    return order, dcg / idcg, mrr, recall


def _check_ranking(doc, rows, all_scores):
    want = [_ranking_oracle(s, _grades(r["relevant"])) for r, s in zip(rows, all_scores)]
    assert [c["prediction"] for c in doc["cases"]] == [w[0][:10] for w in want]
    m = doc["metrics"]
    assert close(m["ndcg@10"], np.mean([w[1] for w in want]))
    assert close(m["mrr@10"], np.mean([w[2] for w in want]))
    for k in (1, 5, 10):
        assert close(m[f"recall@{k}"], np.mean([w[3][k] for w in want])), k
    for c, w in zip(doc["cases"], want):
        assert close(c["value"], w[1]) and c["correct"] == (w[2] == 1.0), c["id"]
    return want


def test_minilm_ranking_matches_sklearn_ndcg(shared, tmp_path):
    """ndcg@10 vs sklearn ndcg_score (k=10, gains = grades) per query; mrr@10, recall@1/5 by hand; all on
    engine.embed cosine similarities. Sanity: REAL MiniLM ranks this hand-made set well (ndcg@10 > 0.8)."""
    _, art = shared("embedding")
    rows = [{"id": f"r{i}", "query": q, "documents": d, "relevant": rel} for i, (q, d, rel) in enumerate(RANKING)]
    doc = run_eval(art, tmp_path, rows, target="onnx-fp32")
    engine = readout_sdk.load(art, target="onnx-fp32")
    all_scores = []
    for q, docs, rel in RANKING:
        s = engine.embed([q]).similarity(engine.embed(docs))[0].astype(np.float64)
        assert len(set(s.round(6))) == len(s)  # no ties: sklearn averages tied gains, trec_eval does not
        all_scores.append(s)
    want = _check_ranking(doc, rows, all_scores)
    for c, s, (_, _, rel), w in zip(doc["cases"], all_scores, RANKING, want):
        g = _grades(rel)
        sk = ndcg_score([[g.get(i, 0) for i in range(len(s))]], [s], k=10)
        assert close(c["value"], sk) and close(w[1], sk)
    assert doc["metrics"]["ndcg@10"] > 0.8 and doc["metrics"]["mrr@10"] > 0.8
    engine.close()


def test_minilm_scored_pairs_correlations(shared, tmp_path):
    """STS-style pairs: Pearson / Spearman vs numpy (Spearman = Pearson of ranks) on engine.embed cosines."""
    _, art = shared("embedding")
    rows = [{"query": a, "document": b, "score": s} for a, b, s in STS]
    doc = run_eval(art, tmp_path, rows, target="onnx-fp32")
    engine = readout_sdk.load(art, target="onnx-fp32")
    cos = np.array([float(engine.embed([a]).similarity(engine.embed([b]))[0, 0]) for a, b, _ in STS])
    gold = np.array([s for _, _, s in STS])
    assert np.allclose([c["prediction"] for c in doc["cases"]], cos, atol=1e-5)
    assert close(doc["metrics"]["pearson"], _pearson(cos, gold), 1e-5)
    assert close(doc["metrics"]["spearman"], _pearson(rankdata(cos), rankdata(gold)), 1e-9)
    assert doc["metrics"]["spearman"] > 0.7 and doc["support"]["pearson"] == len(STS)
    engine.close()


# ---- 8. cross-encoder, sparse, late interaction -------------------------------------------------------------
SMALL = [
    ("Where is the Eiffel Tower?",
     ["The Eiffel Tower stands in Paris.", "Bananas are rich in potassium.", "The Eiffel Tower stands in Paris.",
      "Paris is in France.", "Rain is expected tomorrow."], [2, 3]),  # 0 and 2 tie: input order puts 0 first
    ("Who wrote the report?",
     ["Nobody knows.", "The report was written by Ada Lovelace.", "Cats sleep a lot.", "Nobody knows."],
     {"3": 2, "1": 1}),
    ("cat", ["The cat sat on the mat.", "Dogs bark.", "A kitten is a young cat.", "Dogs bark."], [0, 3]),
]


def _small_rows():
    return [{"id": f"s{i}", "query": q, "documents": d, "relevant": rel} for i, (q, d, rel) in enumerate(SMALL)]


def _check_small(doc, all_scores, tokenizer):
    assert [c["slices"] for c in doc["cases"]] == [[token_bucket_of(len(tokenizer.encode(q).ids))]
                                                   for q, _, _ in SMALL]  # bucket of the query
    for s, (_, docs, _) in zip(all_scores, SMALL):  # duplicates score exactly alike: a real tie
        for i, d in enumerate(docs):
            j = docs.index(d)
            assert s[i] == s[j]
    _check_ranking(doc, _small_rows(), all_scores)


def test_cross_encoder_ranking_follows_score_pairs(shared, tmp_path):
    """case prediction = documents ordered by engine.score_pairs (ties in input order); ranking metrics by
    hand from that order, including the @10 cutoffs with twelve candidates."""
    _, art = shared("cross")
    doc = run_eval(art, tmp_path, _small_rows())
    engine = readout_sdk.load(art)
    scores = [np.array([x.score for x in engine.score_pairs([(q, d) for d in docs])]) for q, docs, _ in SMALL]
    _check_small(doc, scores, engine.tokenizer)
    # twelve candidates, the relevant one put where the SDK ranks it 10th (counted by mrr@10) or 11th (not)
    docs = [f"Document number {i} talks about {w}." for i, w in enumerate(
        "rivers cats taxes music rain chess bread trains paint stars glass wool".split())]
    s = np.array([x.score for x in engine.score_pairs([("What do cats eat?", d) for d in docs])])
    order = sorted(range(len(s)), key=lambda i: (-s[i], i))
    rows = [{"id": "tenth", "query": "What do cats eat?", "documents": docs, "relevant": [order[9]]},
            {"id": "eleventh", "query": "What do cats eat?", "documents": docs, "relevant": {str(order[10]): 2}}]
    doc = run_eval(art, tmp_path, rows, name="twelve.jsonl")
    want = _check_ranking(doc, rows, [s, s])
    assert [w[2] for w in want] == [pytest.approx(0.1), 0.0] and [w[3][10] for w in want] == [1.0, 0.0]
    assert [len(c["prediction"]) for c in doc["cases"]] == [10, 10]
    engine.close()


# the oracle each family's score is: its own SDK vectors, scored by the SDK's documented rule
VECTOR_SCORES = {
    "sparse": lambda engine, texts: [(v, lambda q, d: q.dot(d)) for v in engine.sparse_encode(texts)],
    "late": lambda engine, texts: [(v, Engine.maxsim) for v in engine.encode_tokens(texts)],
}


@pytest.mark.parametrize("key", sorted(VECTOR_SCORES))
def test_vector_family_ranking_follows_its_sdk_score(shared, tmp_path, key):
    """case prediction = documents ordered by SparseVector.dot of engine.sparse_encode (sparse) or
    Engine.maxsim of engine.encode_tokens (late interaction); ties in input order."""
    _, art = shared(key)
    doc = run_eval(art, tmp_path, _small_rows())
    engine = readout_sdk.load(art)
    scores = []
    for q, docs, _ in SMALL:
        (qv, score), *dv = VECTOR_SCORES[key](engine, [q] + docs)
        scores.append(np.array([score(qv, d) for d, _ in dv]))
    _check_small(doc, scores, engine.tokenizer)
    engine.close()


# ---- 9. slices ----------------------------------------------------------------------------------------------
def test_slices_are_the_metric_on_their_subset(shared, tmp_path):
    """token-length buckets from the tokenizer's own count, 'truncated' from classify's flag, and the data's
    'slice' field: each slice's
    support, gated flag and accuracy / macro F1 / per-class equal scikit-learn on that subset."""
    _, art = shared("classify")
    rows = classify_rows()
    doc = run_eval(art, tmp_path, rows, min_support=6)
    engine = readout_sdk.load(art)
    y, p, probs = classify_oracle(engine, rows)
    buckets = [token_bucket_of(len(engine.tokenizer.encode(r["text"]).ids)) for r in rows]
    cut = [g.truncated for g in engine.classify([r["text"] for r in rows])]
    own = [[b] + (["truncated"] if t else []) + r["slice"] for r, b, t in zip(rows, buckets, cut)]
    members = {}
    for k, names in enumerate(own):
        for name in names:
            members.setdefault(name, []).append(k)
    assert {"tokens:1-32", "tokens:33-128", "truncated", "odd", "even", "extra"} <= set(members)
    assert [s["name"] for s in doc["slices"]] == sorted(members)
    for s in doc["slices"]:
        idx = members[s["name"]]
        assert s["support"] == len(idx) and s["gated"] == (len(idx) >= 6), s["name"]
        ys, ps = y[idx], p[idx]
        assert s["metrics"]["accuracy"] == pytest.approx(accuracy_score(ys, ps), abs=1e-12), s["name"]
        assert s["metrics"]["macro_f1"] == pytest.approx(f1_score(ys, ps, average="macro", zero_division=0),
                                                         abs=1e-12), s["name"]
        assert close(s["metrics"]["nll"], log_loss(ys, probs[idx], labels=[0, 1, 2])), s["name"]
        assert close(s["metrics"]["ece"], spec_ece(probs[idx].max(1), ps == ys)), s["name"]
        assert s["metric_support"]["accuracy"] == len(idx)
    assert [c["slices"] for c in doc["cases"]] == own
    engine.close()


# ---- 10. paired ---------------------------------------------------------------------------------------------
def test_paired_against_itself_has_zero_deltas(shared, tmp_path):
    """an artifact as its own parent: every delta 0, no regressed case (transitions = own correct count);
    gates against the parent decide on those values."""
    _, art = shared("classify")
    rows = classify_rows()
    doc = run_eval(art, tmp_path, rows, parent=art, gates=["accuracy>=parent-0.01", "ece<=parent",
                                                             "macro_f1>=parent+0.01"])
    paired = doc["paired"]
    assert doc["min_support"] == 30 and not any(s["gated"] for s in doc["slices"])  # the default minimum
    assert paired["cases"] == len(rows) and paired["parent_metrics"] == doc["metrics"]
    assert all(v == 0.0 for v in paired["deltas"].values()) and set(paired["deltas"]) == set(doc["metrics"])
    n_ok = sum(c["correct"] for c in doc["cases"])
    assert paired["transitions"] == {"both_correct": n_ok, "parent_correct_candidate_wrong": 0,
                                     "parent_wrong_candidate_correct": 0, "both_wrong": len(rows) - n_ok}
    assert paired["regressed_ids"] == [] and paired["improved_ids"] == []
    assert paired["case_deltas"]["min"] == paired["case_deltas"]["max"] == 0.0
    assert [g["decision"] for g in doc["gates"]] == [G.PASS, G.PASS, G.FAIL]
    assert doc["gates"][2]["bound"] == pytest.approx(doc["metrics"]["macro_f1"] + 0.01)
    assert doc["verdict"] == G.FAIL and doc["exit_code"] == 1


def test_paired_compare_hand_built_cases():
    """compare() on hand-built parent / candidate cases: transition counts, regressed and improved ids,
    metric deltas and per-case value deltas (hand values)."""
    parent_ok = [True, True, False, False, True, False]
    cand_ok = [True, False, True, False, False, False]
    ids = list("abcdef")

    def cases(ok):
        return [Case(i, [], None, None, o, float(o)) for i, o in zip(ids, ok)]

    out = compare(TASKS["single_label"], cases(cand_ok), cases(parent_ok), {"accuracy": 2 / 6, "ece": 0.1},
                  {"accuracy": 3 / 6, "ece": 0.25}, "parent-release")
    assert out["transitions"] == {"both_correct": 1, "parent_correct_candidate_wrong": 2,
                                  "parent_wrong_candidate_correct": 1, "both_wrong": 2}
    assert out["regressed_ids"] == ["b", "e"] and out["improved_ids"] == ["c"]
    assert out["deltas"]["accuracy"] == pytest.approx(-1 / 6) and out["deltas"]["ece"] == pytest.approx(-0.15)
    assert out["better"] == {"accuracy": True, "ece": False}
    cd = out["case_deltas"]
    assert cd["mean"] == pytest.approx(-1 / 6) and (cd["min"], cd["max"], cd["median"]) == (-1.0, 1.0, 0.0)
    assert cd["worst_ids"][:2] == ["b", "e"]
    with pytest.raises(ValueError):
        compare(TASKS["single_label"], cases(cand_ok)[:5], cases(parent_ok), {}, {}, None)


# ---- 11. gates ----------------------------------------------------------------------------------------------
def _slice(name, support, gated, accuracy):
    return Slice(name, support, gated, Measured({"accuracy": accuracy}, {"accuracy": support}))


def test_gates_decide_and_verdict():
    """Gate.parse / decide / verdict on hand metrics: PASS at the bound, FAIL past it, parent offsets, slices
    under min support, unknown metrics and missing parents are NOT_EVALUATED; no gates -> NOT_EVALUATED."""
    metrics, support = {"accuracy": 0.5, "ece": 0.05, "nll": None}, {"accuracy": 40, "ece": 40, "nll": 40}
    slices = {"tokens:1-32": _slice("tokens:1-32", 40, True, 0.75), "tiny": _slice("tiny", 3, False, 1.0)}

    def decide(text, parent=None):
        return G.decide(G.Gate.parse(text), metrics, support, slices, parent, 30)

    g = G.Gate.parse(" macro_f1[tokens:1-32] >= 0.7 ")
    assert (g.metric, g.slice, g.op, g.value, g.parent_offset) == ("macro_f1", "tokens:1-32", ">=", 0.7, None)
    g = G.Gate.parse("accuracy>=parent-0.01")
    assert (g.value, g.parent_offset) == (None, pytest.approx(-0.01))
    g = G.Gate.parse("recall@5[tokens:1-32] <= parent + 0.02")
    assert (g.metric, g.slice, g.op, g.value, g.parent_offset) == ("recall@5", "tokens:1-32", "<=", None,
                                                                   pytest.approx(0.02))
    assert decide("accuracy>=0.5").decision == G.PASS
    assert decide("accuracy>=0.5000001").decision == G.FAIL
    assert decide("ece<=0.05").decision == G.PASS and decide("ece<=0.0499").decision == G.FAIL
    r = decide("accuracy>=parent-0.01", {"accuracy": 0.505})
    assert r.decision == G.PASS and r.bound == pytest.approx(0.495)
    assert decide("accuracy>=parent-0.01", {"accuracy": 0.52}).decision == G.FAIL
    assert decide("accuracy>=parent", {"accuracy": 0.5}).decision == G.PASS
    assert decide("accuracy>=parent-0.01").decision == G.NOT_EVALUATED  # no parent run
    assert decide("accuracy>=parent-0.01", {"ece": 0.1}).decision == G.NOT_EVALUATED  # parent lacks it
    assert decide("accuracy[tokens:1-32]>=0.75").decision == G.PASS
    assert decide("accuracy[tokens:1-32]>=0.76").decision == G.FAIL
    r = decide("accuracy[tiny]>=0.1")
    assert r.decision == G.NOT_EVALUATED and r.support == 3
    assert decide("accuracy[nowhere]>=0.1").decision == G.NOT_EVALUATED
    assert decide("bleu>=0.1").decision == G.NOT_EVALUATED  # parsed without the task's metric names
    with pytest.raises(G.GateError, match="did you mean 'accuracy'"):
        G.Gate.parse("acuracy>=0.5", known=("accuracy", "ece"))
    assert decide("nll<=10").decision == G.NOT_EVALUATED  # measured as None
    with pytest.raises(G.GateError):
        G.Gate.parse("accuracy > 0.5")
    res = lambda *ds: [G.GateResult("g", "m", None, "", None, None, None, d) for d in ds]  # noqa: E731
    assert G.verdict([]) == G.NOT_EVALUATED
    assert G.verdict(res(G.PASS, G.PASS)) == G.PASS
    assert G.verdict(res(G.PASS, G.NOT_EVALUATED)) == G.NOT_EVALUATED
    assert G.verdict(res(G.PASS, G.NOT_EVALUATED, G.FAIL)) == G.FAIL


def test_gates_through_evaluate(shared, tmp_path):
    """evaluate() with gates: the measured accuracy as bound passes, a slice under min support and a metric
    this run did not measure are NOT_EVALUATED (verdict NOT_EVALUATED, exit 1); a metric the task never
    reports is refused; no gates: verdict NOT_EVALUATED, exit 0 for development and 1 for a test run."""
    _, art = shared("classify")
    rows = classify_rows()
    y, p, _ = classify_oracle(readout_sdk.load(art), rows)
    acc = float(accuracy_score(y, p))
    doc = run_eval(art, tmp_path, rows, gates=[f"accuracy>={acc!r}", "accuracy[extra]>=0", "coverage>=0.5"],
                   min_support=5)
    # coverage is a single-label metric, but only measured under abstention: NOT_EVALUATED here
    assert [g["decision"] for g in doc["gates"]] == [G.PASS, G.NOT_EVALUATED, G.NOT_EVALUATED]
    assert doc["gates"][0]["measured"] == pytest.approx(acc, abs=1e-12) and doc["gates"][1]["support"] == 4
    assert doc["verdict"] == G.NOT_EVALUATED and doc["exit_code"] == 1
    with pytest.raises(G.GateError, match="bleu"):  # a metric the task never reports is refused up front
        run_eval(art, tmp_path, rows, gates=["bleu>=0.1"])
    doc = run_eval(art, tmp_path, rows, gates=[f"accuracy>={acc + 1e-9!r}"])
    assert doc["verdict"] == G.FAIL and doc["exit_code"] == 1
    doc = run_eval(art, tmp_path, rows)
    assert doc["gates"] == [] and doc["verdict"] == G.NOT_EVALUATED and doc["exit_code"] == 0
    test_rows = [dict(r, text=r["text"] + " (held out)") for r in rows]  # other data: one file keeps one role
    doc = run_eval(art, tmp_path, test_rows, name="test.jsonl", role="test")
    assert doc["verdict"] == G.NOT_EVALUATED and doc["exit_code"] == 1
