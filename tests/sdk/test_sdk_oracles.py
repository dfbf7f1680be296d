"""The SDK's typed results against independent oracles on the same saved models:
SentenceTransformer.encode, CrossEncoder.predict, transformers' text-classification and
token-classification pipelines (every aggregation mode), and for extractive QA (transformers 5
ships no question-answering pipeline) a brute-force search over eager PyTorch logits, window by
window. Scores within 1e-4; labels, offsets and spans exactly equal."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import readout_sdk
from helpers.measured import record_error
from helpers.corpus import CHOICES, PAIRS, TEXTS

TOL = 1e-4


def test_embed_matches_sentence_transformers(shared):
    from sentence_transformers import SentenceTransformer

    model, artifact = shared("embedding")
    engine = readout_sdk.load(artifact)
    texts = list(TEXTS) * 3
    random.Random(0).shuffle(texts)
    got = engine.embed(texts, batch_size=4)
    st = SentenceTransformer(str(model), device="cpu")
    want = st.encode(texts, batch_size=4)
    assert got.vectors.shape == want.shape and got.normalized and got.score_type == "cosine"
    assert np.abs(got.vectors - want).max() < TOL
    sim = st.similarity(want, want).numpy()
    assert np.abs(got.similarity(got) - sim).max() < TOL
    record_error("sdk embed / MiniLM REAL (SentenceTransformer.encode)", float(np.abs(got.vectors - want).max()))


def _pipeline(task, model, **kw):
    from transformers import pipeline

    return pipeline(task, model=str(model), tokenizer=str(model), device="cpu", **kw)


def test_classify_matches_text_classification_pipeline(shared):
    model, artifact = shared("classify")
    engine = readout_sdk.load(artifact)
    got = engine.classify(TEXTS, top_k=3)
    want = _pipeline("text-classification", model, top_k=None)(list(TEXTS))
    for g, w in zip(got, want):
        record_error("sdk classify / bert (text-classification pipeline)", abs(g.score - w[0]["score"]))
        assert g.label == w[0]["label"] and abs(g.score - w[0]["score"]) < TOL
        assert g.score_kind == "probability"
        assert [lab for lab, _ in g.top] == [x["label"] for x in w]
        for x in w:
            assert abs(g.scores[x["label"]] - x["score"]) < TOL


def test_multilabel_matches_pipeline_with_thresholds(shared):
    model, artifact = shared("multilabel")
    engine = readout_sdk.load(artifact)
    got = engine.classify(TEXTS)
    want = _pipeline("text-classification", model, top_k=None, function_to_apply="sigmoid")(list(TEXTS))
    thresholds = dict(zip(engine.labels, [0.5, 0.45, 0.55]))
    for g, w in zip(got, want):
        probs = {x["label"]: x["score"] for x in w}
        assert all(abs(g.scores[k] - v) < TOL for k, v in probs.items())
        record_error("sdk multilabel / roberta (pipeline, sigmoid)", max(abs(g.scores[k] - v) for k, v in probs.items()))
        assert g.labels == tuple(k for k in engine.labels if probs[k] >= thresholds[k])


def test_regression_matches_pipeline(shared):
    model, artifact = shared("regression")
    got = readout_sdk.load(artifact).classify(TEXTS)
    want = _pipeline("text-classification", model, top_k=None, function_to_apply="none")(list(TEXTS))
    for g, w in zip(got, want):
        assert set(g.values) == {"valence", "arousal"}
        for x in w:
            name = {"LABEL_0": "valence", "LABEL_1": "arousal"}.get(x["label"], x["label"])
            assert abs(g.values[name] - x["score"]) < TOL
            record_error("sdk regression / distilbert (pipeline, none)", abs(g.values[name] - x["score"]))


TAG_TEXTS = ["Ada Lovelace lived in London", "hello 🤗 world from Paris", "Johannesburg-based researchers met",
             "naïve café in Zürich", "x"]


@pytest.mark.parametrize("key", ["tag-bert", "tag-xlmr"])
@pytest.mark.parametrize("aggregation", ["none", "simple", "first", "max", "average"])
def test_tag_matches_token_classification_pipeline(shared, key, aggregation):
    model, artifact = shared(key)
    engine = readout_sdk.load(artifact)
    got = engine.tag(TAG_TEXTS, aggregation=aggregation)
    pipe = _pipeline("token-classification", model, aggregation_strategy=aggregation)
    for text, g in zip(TAG_TEXTS, got):
        w = pipe(text)
        assert [(e.label, e.start, e.end) for e in g] == \
            [(x.get("entity_group", x.get("entity")), x["start"], x["end"]) for x in w], text
        assert all(abs(e.score - float(x["score"])) < TOL for e, x in zip(g, w))
        for e, x in zip(g, w):
            record_error(f"sdk tag / {key} (token-classification pipeline)", abs(e.score - float(x["score"])))
        assert all(e.text == text[e.start:e.end] for e in g)


def _brute_force_answers(model_dir, question, context, max_length, stride, max_answer_length, null):
    """Eager logits per window (transformers tokenizer with overflow), every (s, e) pair scored."""
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    model = AutoModelForQuestionAnswering.from_pretrained(str(model_dir)).eval()
    enc = tok(question, context, truncation="only_second", max_length=max_length, stride=stride,
              return_overflowing_tokens=True, return_offsets_mapping=True)
    best, null_scores = [], []
    for w in range(len(enc["input_ids"])):
        seq = enc.sequence_ids(w)
        inputs = {"input_ids": torch.tensor([enc["input_ids"][w]]),
                  "attention_mask": torch.tensor([enc["attention_mask"][w]])}
        if "token_type_ids" in enc and model.config.type_vocab_size > 1:
            inputs["token_type_ids"] = torch.tensor([enc["token_type_ids"][w]])
        with torch.no_grad():
            out = model(**inputs)
        # the QA pipeline's rule: [CLS] stays in the softmax; it is an answer only under a null policy
        keep_cls = enc["input_ids"][w][0] == tok.cls_token_id
        allowed = [s == 1 or (i == 0 and (keep_cls or null)) for i, s in enumerate(seq)]
        def probs(logits):
            z = [math_exp(v) if a else 0.0 for v, a in zip(logits[0].tolist(), allowed)]
            return [v / sum(z) for v in z]
        ps, pe = probs(out.start_logits - out.start_logits.max()), probs(out.end_logits - out.end_logits.max())
        if null:
            null_scores.append(ps[0] * pe[0])
        for s in range(len(seq)):
            for e in range(s, min(len(seq), s + max_answer_length)):
                if seq[s] == 1 and seq[e] == 1:
                    a, b = enc["offset_mapping"][w][s][0], enc["offset_mapping"][w][e][1]
                    best.append((ps[s] * pe[e], a, b))
    best.sort(key=lambda x: -x[0])
    return best, (min(null_scores) if null_scores else None), len(enc["input_ids"])


def math_exp(v):
    import math

    return math.exp(v)


@pytest.mark.parametrize("key", ["qa", "qa-null"])
def test_answer_matches_brute_force_over_windows(shared, key):
    model, artifact = shared(key)
    engine = readout_sdk.load(artifact)
    rec = engine.abi
    null = rec["output"]["null_policy"] == "cls"
    windows_seen = 0
    for question, context in PAIRS:
        got = engine.answer(question, context, top_k=3, max_answer_length=15, align_to_words=False)  # token spans
        spans, null_score, windows = _brute_force_answers(model, question, context, rec["input"]["max_length"],
                                                          rec["output"]["window"]["stride"], 15, null)
        windows_seen = max(windows_seen, windows)
        expected = []
        for score, a, b in spans:
            if (a, b) not in [(x[1], x[2]) for x in expected]:
                expected.append((score, a, b))
        if null:
            expected.append((null_score, 0, 0))
            expected.sort(key=lambda x: -x[0])
        assert len(got) == min(3, len(expected))
        for g, (score, a, b) in zip(got, expected[:3]):
            assert (g.start, g.end) == (a, b) and abs(g.score - score) < TOL
            assert g.text == context[a:b]
            assert g.is_null == (null and (a, b) == (0, 0) and score == null_score)
            record_error(f"sdk answer / {key} (exhaustive span search)", abs(g.score - score))
    if key == "qa":
        assert windows_seen > 1, "the long context should have been split into windows"


def test_rerank_matches_cross_encoder_predict(shared):
    from sentence_transformers import CrossEncoder

    model, artifact = shared("cross")
    engine = readout_sdk.load(artifact)
    query = "Where is the Eiffel Tower?"
    docs = [c for _, c in PAIRS]
    want = CrossEncoder(str(model), device="cpu").predict([(query, d) for d in docs])
    ranked = engine.rerank(query, docs)
    assert [r.index for r in ranked] == sorted(range(len(docs)), key=lambda i: (-want[i], i))
    for r in ranked:
        assert abs(r.score - float(want[r.index])) < TOL and r.document == docs[r.index]
        record_error("sdk rerank / bert (CrossEncoder.predict)", abs(r.score - float(want[r.index])))
    pairs = engine.score_pairs([(query, d) for d in docs])
    assert [p.index for p in pairs] == list(range(len(docs)))
    assert engine.rerank(query, docs, top_k=2) == ranked[:2]


def test_sparse_encode_matches_eager_splade(shared):
    from helpers import oracles

    model, artifact = shared("sparse")
    engine = readout_sdk.load(artifact)
    got = engine.sparse_encode(TEXTS[:4])
    want = oracles.splade_outputs(model, TEXTS[:4], engine.abi["input"]["max_length"])
    for g, w in zip(got, want):
        dense = np.zeros_like(w["sparse_weights"])
        dense[g.indices] = g.values
        assert np.abs(dense - w["sparse_weights"]).max() < TOL
        record_error("sdk sparse_encode / SPLADE REAL (eager)", float(np.abs(dense - w["sparse_weights"]).max()))
        assert list(g.values) == sorted(g.values, reverse=True)
        assert g.tokens[0] == engine.tokenizer.id_to_token(int(g.indices[0]))


def test_choose_matches_eager_multiple_choice(shared):
    from helpers import oracles

    model, artifact = shared("choice")
    engine = readout_sdk.load(artifact)
    want = oracles.multiple_choice_outputs(model, CHOICES, engine.abi["input"]["max_length"])
    for (question, choices), w in zip(CHOICES, want):
        got = engine.choose(question, choices)
        probs = np.exp(w["logits"] - w["logits"].max())
        probs /= probs.sum()
        assert got.index == int(np.argmax(probs)) and got.choice == choices[got.index]
        assert np.abs(np.array(got.scores) - probs).max() < TOL
        record_error("sdk choose / bert (eager, per choice)", float(np.abs(np.array(got.scores) - probs).max()))
