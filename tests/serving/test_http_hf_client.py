"""huggingface_hub's `InferenceClient` against `readout-export serve-http`, task by task (`POST /`, the Hugging
Face Inference API's shape), and text-embeddings-inference's `/similarity`, `truncation_direction` and `/predict`
pair convention over plain HTTP. Every answer must equal the SDK's own answer on the same artifact, computed
here directly (`readout_sdk.load`); the client itself parses each answer (its dataclasses are the shape check).

Models: REAL all-MiniLM-L6-v2 (max_length 256; and with E5-style roles and a 128-wide form); SYNTHETIC tiny
classifier, cross-encoder, tagger and windowed QA models (tests/helpers/sdk_fixtures.py)."""
from __future__ import annotations

import httpx
import numpy as np
import pytest
from tokenizers import Tokenizer

from helpers.corpus import PAIRS, TEXTS
from helpers.http_server import loaded, serving

KEY = "hf-key-123"
SERVED = {"minilm": "embedding", "asym": "roles", "sentiment": "classify", "cross": "cross", "tagger": "tag-bert",
          "qa": "qa"}
LONG = " ".join(TEXTS * 3)  # over MiniLM's 256 tokens: its start and its end differ


@pytest.fixture(scope="module")
def engines(shared):
    yield from loaded(shared, SERVED)


@pytest.fixture(scope="module")
def server(shared, engines):
    yield from serving(shared, SERVED, KEY)


@pytest.fixture(scope="module")
def client(server):
    """``client(name)``: an InferenceClient pointed at one served model (None: the default, the first)."""
    from huggingface_hub import InferenceClient, constants

    with pytest.MonkeyPatch.context() as mp:  # the suite sets HF_HUB_OFFLINE=1; the client calls only loopback
        mp.setattr(constants, "HF_HUB_OFFLINE", False)
        yield lambda name=None: InferenceClient(model=server.url + (f"/models/{name}" if name else ""), token=KEY)


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as c:
        yield c


def refused(call, status: int, *parts: str) -> str:
    """The client's HTTP error for ``call``: its status and the server's one-line message holding ``parts``."""
    from huggingface_hub.errors import HfHubHTTPError

    with pytest.raises(HfHubHTTPError) as e:
        call()
    assert e.value.response.status_code == status, e.value.response.text
    text = e.value.response.json()["error"]
    assert all(p in text for p in parts), text
    return text


def sdk_vectors(engine, texts, side=None, role=None):
    return engine.embed(engine.prepare(texts, role=role, truncation_side=side)).vectors


# ---- feature_extraction -----------------------------------------------------------------------------------
def test_feature_extraction_left_and_right_truncation_are_the_sdks(client, http, engines):
    e = engines["minilm"]
    assert e.prepare([LONG]).truncated == [True]
    # the SDK's left cut keeps the text's last content tokens, its right cut the first (the uncut ids: a copy of
    # the artifact's tokenizer with truncation off)
    uncut = Tokenizer.from_str(e.tokenizer.to_str())
    uncut.no_truncation()
    ids = uncut.encode(LONG, add_special_tokens=False).ids
    room = e.abi["input"]["max_length"] - 2  # [CLS] ... [SEP]
    for side, want_ids in (("left", ids[-room:]), ("right", ids[:room])):
        assert e.prepare([LONG], truncation_side=side).parts[0][0].encodings[0].ids[1:-1] == want_ids
    with pytest.raises(ValueError, match="truncation_side must be one of"):
        e.prepare([LONG], truncation_side="Left")  # the SDK's spelling is the record's: "left" / "right"
    left, right = sdk_vectors(e, [LONG], "left"), sdk_vectors(e, [LONG], "right")
    assert not np.allclose(left, right, atol=1e-3)  # the two ends of the text make different vectors
    np.testing.assert_allclose(right, e.embed([LONG]).vectors, atol=1e-6)  # the record cuts from the right
    hub = client()
    for side, want in (("left", left), ("right", right), ("Left", left), ("Right", right)):
        np.testing.assert_allclose(hub.feature_extraction(LONG, truncation_direction=side), want, atol=1e-6)
        tei = http.post("/embed", json={"inputs": [LONG, TEXTS[1]], "truncation_direction": side})
        assert tei.status_code == 200, tei.text
        np.testing.assert_allclose(tei.json(), np.vstack([want, sdk_vectors(e, TEXTS[1:2])]), atol=1e-6)
    np.testing.assert_allclose(hub.feature_extraction(LONG), right, atol=1e-6)  # absent: the record's side
    refused(lambda: hub.feature_extraction(LONG, truncate=False, truncation_direction="left"), 413, "truncate is false")


@pytest.mark.parametrize("value", ["Sideways", 123, "", ["Left"]])
def test_a_bad_truncation_direction_is_a_422_naming_it(client, http, value):
    r = http.post("/embed", json={"inputs": "x", "truncation_direction": value})
    assert r.status_code == 422 and r.json()["error_type"] == "Validation", r.text
    assert r.json()["error"].startswith("$.truncation_direction: expected \"Left\" or \"Right\"")
    r = http.post("/models/sentiment/predict", json={"inputs": "x", "truncation_direction": value})
    assert r.status_code == 422 and "$.truncation_direction" in r.json()["error"], r.text
    if isinstance(value, str):
        refused(lambda: client().feature_extraction("x", truncation_direction=value), 422, "$.truncation_direction")


def test_feature_extraction_prompt_name_dimensions_and_normalize(client, engines):
    e, hub = engines["asym"], client("asym")
    for role in ("query", "document"):
        np.testing.assert_allclose(hub.feature_extraction(TEXTS[3:6], prompt_name=role), e.embed(TEXTS[3:6], role=role)
                                   .vectors, atol=1e-6)
        np.testing.assert_allclose(hub.feature_extraction(TEXTS[4], prompt_name=role, dimensions=128),
                                   e.embed(TEXTS[4:5], role=role, form="128/float32").vectors, atol=1e-6)
    np.testing.assert_allclose(hub.feature_extraction(TEXTS[2], normalize=True), e.embed(TEXTS[2:3]).vectors, atol=1e-6)
    refused(lambda: hub.feature_extraction("x", normalize=False), 422, "$.normalize")
    refused(lambda: hub.feature_extraction("x", dimensions=100), 422, "$.dimensions", "[128, 384]")
    refused(lambda: hub.feature_extraction("x", prompt_name="passage"), 422, "passage")
    # a left cut would remove the role's prompt (its rows are read as the prompt's): refused, not misread
    refused(lambda: hub.feature_extraction(LONG * 2, truncation_direction="left"), 422, "prompt")
    np.testing.assert_allclose(hub.feature_extraction(TEXTS[1], truncation_direction="left"),
                               sdk_vectors(e, TEXTS[1:2], "left"), atol=1e-6)  # nothing cut: allowed


# ---- sentence_similarity ----------------------------------------------------------------------------------
def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return (a @ b.T)[0]


def test_sentence_similarity_and_tei_similarity_are_cosines_of_the_sdks_vectors(server, client, http, engines):
    e = engines["minilm"]
    assert e.abi["output"]["score_type"] == "cosine"
    source, others = TEXTS[4], TEXTS[:4] + [LONG]
    want = cosine(e.embed([source]).vectors, e.embed(others).vectors)
    got = client().sentence_similarity(source, others)
    assert isinstance(got, list) and len(got) == len(others)
    np.testing.assert_allclose(got, want, atol=1e-6)
    from huggingface_hub import InferenceClient  # base_url=: the client's alias of model=, as OpenAI's client names it

    np.testing.assert_allclose(InferenceClient(base_url=f"{server.url}/models/minilm", token=KEY)
                               .sentence_similarity(source, others), want, atol=1e-6)
    assert max(got) < 1.0 and float(cosine(e.embed([source]).vectors, e.embed([source]).vectors)[0]) == \
        pytest.approx(client().sentence_similarity(source, [source])[0], abs=1e-6)
    asym = engines["asym"]
    tei = http.post("/models/asym/similarity", json={"inputs": {"source_sentence": source, "sentences": others},
                                                     "parameters": {"prompt_name": "document"}})
    assert tei.status_code == 200, tei.text
    np.testing.assert_allclose(tei.json(), cosine(asym.embed([source], role="document").vectors,
                                                  asym.embed(others, role="document").vectors), atol=1e-6)
    left = http.post("/similarity", json={"inputs": {"source_sentence": source, "sentences": [LONG]},
                                          "parameters": {"truncation_direction": "Left"}}).json()
    np.testing.assert_allclose(left, cosine(e.embed([source]).vectors, sdk_vectors(e, [LONG], "left")), atol=1e-6)


@pytest.mark.parametrize("path, doc, status, part", [
    ("/similarity", {"inputs": {"source_sentence": "a", "sentences": []}}, 422,
     "$.inputs.sentences: the list is empty"),
    ("/similarity", {"inputs": {"source_sentence": "a", "sentences": "b"}}, 400, "$.inputs.sentences: expected a list"),
    ("/similarity", {"inputs": {"source_sentence": 1, "sentences": ["b"]}}, 400, "$.inputs.source_sentence"),
    ("/similarity", {"inputs": {"sentences": ["b"]}}, 400, "$.inputs.source_sentence: expected a string, got null"),
    ("/similarity", {"inputs": {"source_sentence": "a", "sentences": ["b", 2]}}, 400, "$.inputs.sentences[1]"),
    ("/similarity", {"inputs": "a"}, 400, "$.inputs: expected an object"),
    ("/models/sentiment/similarity", {"inputs": {"source_sentence": "a", "sentences": ["b"]}}, 404,
     "/similarity: model 'sentiment' is a sequence_classification model"),
])
def test_similarity_refusals_name_the_path(http, path, doc, status, part):
    r = http.post(path, json=doc)
    assert r.status_code == status and part in r.json()["error"], r.text


# ---- text_classification (and a cross-encoder's pairs) ----------------------------------------------------
def test_text_classification_is_the_sdks_probabilities_best_first(client, engines):
    e, hub = engines["sentiment"], client("sentiment")
    for text in TEXTS[:4]:
        want = sorted(e.classify([text])[0].scores.items(), key=lambda kv: -kv[1])
        got = hub.text_classification(text)
        assert [g.label for g in got] == [k for k, _ in want]
        np.testing.assert_allclose([g.score for g in got], [v for _, v in want], atol=1e-6)
        top = hub.text_classification(text, top_k=2)
        assert [(g.label, round(g.score, 6)) for g in top] == [(k, round(v, 6)) for k, v in want[:2]]
    assert len(hub.text_classification(TEXTS[0], function_to_apply="softmax")) == 3
    refused(lambda: hub.text_classification(TEXTS[0], function_to_apply="sigmoid"), 422, "$.function_to_apply",
            "softmax")
    refused(lambda: hub.text_classification(TEXTS[0], top_k=0), 400, "$.top_k")


def test_text_classification_of_pairs_is_the_cross_encoders_score(client, engines):
    e, hub = engines["cross"], client("cross")
    label = e.labels[0]
    for query, doc in PAIRS[:4]:
        want = e.score_pairs([(query, doc)])[0].score
        got = hub.text_classification({"text": query, "text_pair": doc})  # transformers' pair spelling
        assert [g.label for g in got] == [label] and got[0].score == pytest.approx(want, abs=1e-6)
        tei_pair = hub.text_classification([query, doc])  # text-embeddings-inference's pair
        assert tei_pair[0].score == pytest.approx(want, abs=1e-6)
    refused(lambda: hub.text_classification("only a query"), 422, "(query, document) pairs", "text_pair")


def test_rerank_and_predict_honour_the_truncation_direction(http, engines):
    e = engines["cross"]
    query, docs = PAIRS[0][0], [LONG, PAIRS[1][1]]
    for side in ("Left", "Right"):
        want = e.score_pairs(e.prepare([(query, d) for d in docs], truncation_side=side.lower()))
        ranked = http.post("/models/cross/rerank", json={"query": query, "texts": docs,
                                                         "truncation_direction": side}).json()
        assert {g["index"]: g["score"] for g in ranked} == pytest.approx({w.index: w.score for w in want}, abs=1e-6)
        pair = http.post("/models/cross/predict", json={"inputs": [query, LONG], "truncation_direction": side}).json()
        assert pair[0]["score"] == pytest.approx(want[0].score, abs=1e-6)
    left = e.score_pairs(e.prepare([(query, LONG)], truncation_side="left"))[0].score
    assert left != pytest.approx(e.score_pairs([(query, LONG)])[0].score, abs=1e-6)


# ---- /predict: a list of two strings is one pair; a refusal says how to send a batch ------------------------
def test_predict_reads_two_strings_as_a_pair_and_says_how_to_batch(http, engines):
    pair = http.post("/models/cross/predict", json={"inputs": list(PAIRS[2])}).json()
    assert pair[0]["score"] == pytest.approx(engines["cross"].score_pairs([PAIRS[2]])[0].score, abs=1e-6)
    two = http.post("/models/sentiment/predict", json={"inputs": ["first text", "second text"]})
    assert two.status_code == 422, two.text
    assert "a list of two strings is one pair" in two.json()["error"]
    assert '{"inputs": [["a"], ["b", "c"]]}' in two.json()["error"]  # how to send a batch
    for doc in ({"inputs": ["a", "b", "c"]}, {"inputs": [1]}, {"inputs": [["a", "b", "c"]]}):
        r = http.post("/models/sentiment/predict", json=doc)
        assert r.status_code == 400 and "a batch is a list of sequences" in r.json()["error"], r.text
    batch = http.post("/models/sentiment/predict", json={"inputs": [["first text"], ["second text"]]}).json()
    for got, want in zip(batch, engines["sentiment"].classify(["first text", "second text"])):
        assert {g["label"]: g["score"] for g in got} == pytest.approx(dict(want.scores), abs=1e-6)


# ---- token_classification ---------------------------------------------------------------------------------
def test_token_classification_is_the_sdks_entities(client, engines):
    e, hub = engines["tagger"], client("tagger")
    tagged = [t for t in TEXTS if len(e.tag([t])[0])]
    assert tagged, "the synthetic tagger finds entities in some corpus texts"
    for text in tagged[:4]:
        want = e.tag([text])[0]
        got = hub.token_classification(text)
        assert [(g.entity_group, g.word, g.start, g.end) for g in got] == \
            [(w.label, w.text, w.start, w.end) for w in want]
        np.testing.assert_allclose([g.score for g in got], [w.score for w in want], atol=1e-6)
        assert all(text[g.start:g.end] == g.word for g in got)
    text = tagged[0]
    tokens = hub.token_classification(text, aggregation_strategy="none")
    want = e.tag([text], aggregation="none")[0]
    assert [(g.entity, g.entity_group, g.start, g.end) for g in tokens] == \
        [(w.label, None, w.start, w.end) for w in want]
    first = e.tag([text], aggregation="first")[0]
    assert [(g.entity_group, g.start) for g in hub.token_classification(text, aggregation_strategy="first")] == \
        [(w.label, w.start) for w in first]
    dropped = {want[0].label}
    kept = hub.token_classification(text, aggregation_strategy="none", ignore_labels=sorted(dropped))
    assert [g.entity for g in kept] == [w.label for w in want if w.label not in dropped]
    refused(lambda: hub.token_classification(text, aggregation_strategy="median"), 422, "$.aggregation_strategy")
    refused(lambda: hub.token_classification(text, stride=16), 422, "$.stride")


# ---- question_answering -----------------------------------------------------------------------------------
def test_question_answering_is_the_sdks_answer_and_top_k_a_list(client, engines):
    e, hub = engines["qa"], client("qa")
    for question, context in PAIRS[:5] + PAIRS[-1:]:  # the last context needs several windows
        want = e.answer(question, context)
        got = hub.question_answering(question, context)
        assert (got.answer, got.start, got.end) == (want.text, want.start, want.end)
        assert got.score == pytest.approx(want.score, abs=1e-6) and context[got.start:got.end] == got.answer
        top = hub.question_answering(question, context, top_k=3)
        wanted = e.answer(question, context, top_k=3)
        assert isinstance(top, list) and len(top) == len(wanted) > 1
        assert [(a.answer, a.start, a.end) for a in top] == [(w.text, w.start, w.end) for w in wanted]
        np.testing.assert_allclose([a.score for a in top], [w.score for w in wanted], atol=1e-6)
    question, context = PAIRS[-1]
    short = hub.question_answering(question, context, max_answer_len=3, align_to_words=False)
    want = e.answer(question, context, max_answer_length=3, align_to_words=False)
    assert (short.answer, short.start, short.end) == (want.text, want.start, want.end)
    refused(lambda: hub.question_answering(question, context, doc_stride=5), 422, "$.doc_stride", "12")
    refused(lambda: hub.question_answering(question, context, max_seq_len=64), 422, "$.max_seq_len", "48")
    refused(lambda: hub.question_answering(question, context, handle_impossible_answer=True), 422,
            "$.handle_impossible_answer")
    refused(lambda: hub.question_answering(question, ""), 422, "context")


def test_inference_api_batches_answer_one_list_per_input(http, engines):
    """Plain HTTP in the Inference API's shape: a list of inputs answers one result per input."""
    texts = TEXTS[:3]
    got = http.post("/models/sentiment/", json={"inputs": texts, "parameters": {"top_k": 1}}).json()
    assert [g[0]["label"] for g in got] == [w.label for w in engines["sentiment"].classify(texts)]
    rows = [{"question": q, "context": c} for q, c in PAIRS[:2] + PAIRS[-1:]]
    want = [engines["qa"].answer(q, c).text for q, c in PAIRS[:2] + PAIRS[-1:]]
    assert [a["answer"] for a in http.post("/models/qa/", json={"inputs": rows}).json()] == want
    # a windowed artifact cuts nothing (its long context runs as windows): either side answers the same
    for side in ("Left", "Right"):
        doc = {"inputs": rows, "parameters": {"truncation_direction": side}}
        assert [a["answer"] for a in http.post("/models/qa/", json=doc).json()] == want
