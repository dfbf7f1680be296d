"""`readout-export serve-http` started as a user starts it, on loopback, called by real clients: the
`openai` client, huggingface_hub's InferenceClient (text-embeddings-inference's dialect), LangChain's
OpenAIEmbeddings, and plain HTTP for the other routes. Every answer must equal the SDK's own call on
the same artifact (the oracle here: the SDK is itself proven against eager PyTorch by parity), carry
the artifact's release id, and every bad request must get one 4xx with one clear message while the
server stays healthy.

Models: REAL all-MiniLM-L6-v2 (embeddings; with E5-style roles and a 128-wide form) and SPLADE-tiny
(sparse); SYNTHETIC tiny classifier, cross-encoder, tagger, QA, multiple-choice and late-interaction
models (tests/helpers/sdk_fixtures.py)."""
from __future__ import annotations

import base64
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import pytest

from helpers.corpus import PAIRS, TEXTS
from helpers.http_server import HttpServer, loaded, serving

KEY = "test-key-123"
SERVED = {"minilm": "embedding", "asym": "roles", "splade": "sparse", "cross": "cross", "sentiment": "classify",
          "tagger": "tag-bert", "qa": "qa", "choice": "choice", "late": "late"}


@pytest.fixture(scope="module")
def engines(shared):
    yield from loaded(shared, SERVED)


@pytest.fixture(scope="module")
def server(shared, engines):
    yield from serving(shared, SERVED, KEY)


@pytest.fixture(scope="module")
def http(server):
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as c:
        yield c


def post(http, path, doc, status=200):
    r = http.post(path, json=doc)
    assert r.status_code == status, r.text
    return r


# ---- OpenAI ---------------------------------------------------------------------------------------
def test_openai_client_gets_the_sdks_vectors_and_release_id(server, engines):
    import openai

    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=KEY)
    want = engines["minilm"].embed(TEXTS)
    got = client.embeddings.create(model="minilm", input=TEXTS)  # the client asks for base64 and decodes it
    assert [d.index for d in got.data] == list(range(len(TEXTS)))
    np.testing.assert_allclose(np.array([d.embedding for d in got.data]), want.vectors, atol=1e-6)
    assert got.model == "minilm" and got.release_id == engines["minilm"].release_id
    assert got.usage.prompt_tokens == sum(len(engines["minilm"].tokenizer.encode(t).ids) for t in TEXTS)
    floats = client.embeddings.create(model="minilm", input=TEXTS[0], encoding_format="float")
    np.testing.assert_allclose(floats.data[0].embedding, want.vectors[0], atol=1e-6)
    raw = client.embeddings.with_raw_response.create(model="minilm", input="x")
    assert raw.headers["x-readout-release-id"] == engines["minilm"].release_id
    models = {m.id: m for m in client.models.list()}
    assert set(models) == set(SERVED) and models["asym"].release_id == engines["asym"].release_id
    assert models["asym"].dimensions == [128, 384] and models["sentiment"].family == "sequence_classification"


def test_openai_dimensions_and_roles_are_the_declared_form_and_role(server, engines):
    import openai

    client = openai.OpenAI(base_url=f"{server.url}/v1", api_key=KEY)
    e = engines["asym"]
    for role in ("query", "document"):
        got = client.embeddings.create(model="asym", input=TEXTS[:5], dimensions=128, extra_body={"role": role})
        np.testing.assert_allclose([d.embedding for d in got.data],
                                   e.embed(TEXTS[:5], role=role, form="128/float32").vectors, atol=1e-6)
    default = client.embeddings.create(model="asym", input=TEXTS[:2], encoding_format="float")
    np.testing.assert_allclose([d.embedding for d in default.data], e.embed(TEXTS[:2]).vectors, atol=1e-6)
    with pytest.raises(openai.BadRequestError, match=r"declares no 100-dimensional vectors; its widths are \[128, 384\]"):
        client.embeddings.create(model="asym", input="x", dimensions=100)
    with pytest.raises(openai.BadRequestError, match="passage"):
        client.embeddings.create(model="asym", input="x", extra_body={"role": "passage"})


def test_token_arrays_are_this_models_own_ids_and_only_exact_ones(server, http, engines):
    text = "The quick brown fox jumps over the lazy dog."
    tokens = post(http, "/tokenize", {"inputs": text, "add_special_tokens": False}).json()[0]
    ids = [t["id"] for t in tokens]
    assert ids == engines["minilm"].tokenizer.encode(text, add_special_tokens=False).ids
    assert [t["text"] for t in tokens][:2] == ["The", "quick"] and not any(t["special"] for t in tokens)
    unvouched = post(http, "/v1/embeddings", {"model": "minilm", "input": [ids, text]}, 400).json()["error"]
    assert unvouched["param"] == "$.input[0]" and "tiktoken" in unvouched["message"]  # OpenAI's ids look the same
    own = {"model": "minilm", "own_token_ids": True}  # the request vouches: these are this model's own ids
    got = post(http, "/v1/embeddings", {**own, "input": [ids, text], "encoding_format": "float"}).json()
    np.testing.assert_allclose(got["data"][0]["embedding"], got["data"][1]["embedding"], atol=1e-6)
    np.testing.assert_allclose(got["data"][0]["embedding"], engines["minilm"].embed([text]).vectors[0], atol=1e-6)
    bad = post(http, "/v1/embeddings", {**own, "input": [[15339, 91000]]}, 400).json()["error"]
    assert bad["param"] == "$.input[0]" and "91000 is not a token id of this model" in bad["message"]
    piece = engines["minilm"].tokenizer.token_to_id("##ing")  # alone, it decodes to "##ing": three other tokens
    loose = post(http, "/v1/embeddings", {**own, "input": [piece]}, 400).json()["error"]["message"]
    assert "do not encode back" in loose
    cls = post(http, "/v1/embeddings", {**own, "input": [101] + ids}, 400).json()["error"]["message"]
    assert "special token" in cls


def test_langchain_openai_embeddings(server, engines):
    from langchain_openai import OpenAIEmbeddings

    # check_embedding_ctx_length=False: LangChain otherwise sends tiktoken ids, which mean other tokens
    lc = OpenAIEmbeddings(model="minilm", base_url=f"{server.url}/v1", api_key=KEY, check_embedding_ctx_length=False)
    np.testing.assert_allclose(lc.embed_documents(TEXTS[:6]), engines["minilm"].embed(TEXTS[:6]).vectors, atol=1e-6)
    np.testing.assert_allclose(lc.embed_query(TEXTS[0]), engines["minilm"].embed(TEXTS[:1]).vectors[0], atol=1e-6)


# ---- text-embeddings-inference ----------------------------------------------------------------------
def test_huggingface_hub_client_feature_extraction(server, engines, monkeypatch):
    from huggingface_hub import InferenceClient, constants

    # the suite sets HF_HUB_OFFLINE=1 (no hub access); the client only calls this loopback server
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)

    client = InferenceClient(model=server.url, token=KEY)
    np.testing.assert_allclose(client.feature_extraction(TEXTS[3]), engines["minilm"].embed(TEXTS[3:4]).vectors, atol=1e-6)
    named = InferenceClient(model=f"{server.url}/models/asym", token=KEY)
    np.testing.assert_allclose(named.feature_extraction(TEXTS[3], prompt_name="document"),
                               engines["asym"].embed(TEXTS[3:4], role="document").vectors, atol=1e-6)


def test_tei_embed_sparse_rerank_predict_equal_the_sdk(http, engines):
    r = post(http, "/embed", {"inputs": TEXTS[:4]})
    assert r.headers["x-readout-release-id"] == engines["minilm"].release_id
    np.testing.assert_allclose(r.json(), engines["minilm"].embed(TEXTS[:4]).vectors, atol=1e-6)
    sparse = post(http, "/models/splade/embed_sparse", {"inputs": TEXTS[:3]}).json()
    for got, want in zip(sparse, engines["splade"].sparse_encode(TEXTS[:3])):
        assert [g["index"] for g in got] == list(want.indices)
        np.testing.assert_allclose([g["value"] for g in got], want.values, atol=1e-6)
    query, docs = PAIRS[0][0], [d for _, d in PAIRS[:6]]
    ranked = post(http, "/models/cross/rerank", {"query": query, "texts": docs, "return_text": True}).json()
    want = engines["cross"].rerank(query, docs)
    assert [g["index"] for g in ranked] == [w.index for w in want]
    assert [g["text"] for g in ranked] == [docs[w.index] for w in want]
    np.testing.assert_allclose([g["score"] for g in ranked], [w.score for w in want], atol=1e-6)
    single = post(http, "/models/sentiment/predict", {"inputs": TEXTS[0]}).json()
    batch = post(http, "/models/sentiment/predict", {"inputs": [[t] for t in TEXTS[:5]]}).json()
    for got, want in zip([single] + batch, engines["sentiment"].classify([TEXTS[0]] + TEXTS[:5])):
        assert got[0]["label"] == want.label and got[0]["score"] == pytest.approx(want.score, abs=1e-6)
        assert {g["label"]: g["score"] for g in got} == pytest.approx(dict(want.scores), abs=1e-6)
    pair = post(http, "/models/cross/predict", {"inputs": list(PAIRS[1])}).json()
    assert pair[0]["score"] == pytest.approx(engines["cross"].score_pairs([PAIRS[1]])[0].score, abs=1e-6)
    info = http.get("/models/sentiment/info").json()
    assert info["model_type"] == {"classifier": {"id2label": {"0": "negative", "1": "neutral", "2": "positive"},
                                                 "label2id": {"negative": 0, "neutral": 1, "positive": 2}}}
    assert info["release_id"] == info["model_sha"] == engines["sentiment"].release_id


def test_typed_routes_entities_answers_choices_token_vectors(http, engines):
    from readout_sdk.serving.records import plain

    ents = post(http, "/models/tagger/entities", {"inputs": TEXTS[:3]}).json()
    assert ents["release_id"] == engines["tagger"].release_id
    assert ents["results"] == plain(engines["tagger"].family_spec.records(engines["tagger"].tag(TEXTS[:3])))
    q = {"question": "Who wrote it?", "context": "The report was written by Ada Lovelace in London in 1843."}
    got = post(http, "/models/qa/answers", {"inputs": [q, q]}).json()["results"]
    want = engines["qa"].answer(q["question"], q["context"])
    assert got[0]["answer"] == want.text and (got[0]["start"], got[0]["end"]) == (want.start, want.end) and got[0] == got[1]
    c = {"question": "Where do fish live?", "choices": ["in water", "in trees", "on the moon"]}
    chosen = post(http, "/models/choice/choices", {"inputs": c}).json()["results"][0]
    assert chosen["index"] == engines["choice"].choose(c["question"], c["choices"]).index
    tv = post(http, "/models/late/token_vectors", {"inputs": TEXTS[:2]}).json()["results"]
    for got, want in zip(tv, engines["late"].encode_tokens(TEXTS[:2])):
        assert got["tokens"] == list(want.tokens)
        np.testing.assert_allclose(got["token_vectors"], want.vectors, atol=1e-6)
    every = post(http, "/models/late/embed_all", {"inputs": TEXTS[:1]}).json()
    np.testing.assert_allclose(every[0], tv[0]["token_vectors"], atol=1e-6)


# ---- refusals ------------------------------------------------------------------------------------
BAD = [  # (path, body, headers, status, message part)
    ("/v1/embeddings", b"{not json", None, 400, "not JSON"),
    ("/v1/embeddings", b"[1, 2]", None, 400, "$: expected a JSON object"),
    ("/v1/embeddings", {"model": "minilm", "input": 7}, None, 400, "$.input: expected a string"),
    ("/v1/embeddings", {"model": "minilm", "input": []}, None, 400, "$.input: the list is empty"),  # OpenAI: 400
    ("/v1/embeddings", {"model": "minilm", "input": ["fine", "   "]}, None, 400, "item 1"),
    ("/v1/embeddings", {"model": "minilm", "input": ["a", 3]}, None, 400, "$.input[1]: expected a string"),
    ("/v1/embeddings", {"model": "nope", "input": "a"}, None, 404, "model 'nope' is not served here"),
    ("/v1/embeddings", {"model": "sentiment", "input": "a"}, None, 404, "sequence_classification model, served by /predict"),
    ("/v1/embeddings", {"model": "minilm", "input": "a", "encoding_format": "int8"}, None, 400, "encoding_format"),
    ("/v1/embeddings", {"model": "minilm", "input": "a", "role": "query"}, None, 400, "it declares no roles"),
    ("/v1/embeddings", {"model": "minilm", "input": "a"}, {}, 401, "missing API key"),
    ("/v1/embeddings", {"model": "minilm", "input": "a"}, {"Authorization": "Bearer wrong"}, 401, "wrong API key"),
    ("/v1/embeddings", {"model": "minilm", "input": "x" * 2_100_000}, None, 413, "over 2000000 bytes"),
    ("/v1/embeddings", {"model": "minilm", "input": ["a"] * 2049}, None, 413, "over the limit of 2048 per request"),
    ("/embed", {"inputs": "a", "normalize": False}, None, 422, "normalize=false would change their meaning"),
    ("/embed", {"inputs": "word " * 400, "truncate": False}, None, 413, "truncate is false"),
    ("/models/cross/rerank", {"query": "q", "texts": ["a"], "raw_scores": True}, None, 422, "raw scores are not served"),
    ("/models/sentiment/predict", {"inputs": ["a", "b", "c"]}, None, 400, "3 strings"),
    ("/models/sentiment/rerank", {"query": "q", "texts": ["a"]}, None, 404, "served by /predict"),
    ("/models/qa/answers", {"inputs": [{"question": "q"}]}, None, 422, "missing field 'context'"),
    ("/models/nope/embed", {"inputs": "a"}, None, 404, "model 'nope' is not served here"),
    ("/nowhere", {}, None, 404, "no such route"),
]


@pytest.mark.parametrize("path,doc,headers,status,part", BAD, ids=[f"{b[0]}-{b[3]}-{i}" for i, b in enumerate(BAD)])
def test_bad_requests_get_one_clear_4xx(server, http, path, doc, headers, status, part):
    # raw bytes declared JSON, as a client sending broken JSON declares them (undeclared bodies are 415:
    # test_http_hardening.py)
    kw = {"content": doc, "headers": {"Content-Type": "application/json"}} if isinstance(doc, bytes) else {"json": doc}
    if headers is not None:
        r = httpx.post(server.url + path, headers=headers, timeout=30, **kw)
    else:
        r = http.post(path, **kw)
    assert r.status_code == status, r.text
    error = r.json()["error"]
    message = error["message"] if isinstance(error, dict) else error
    assert part in message and "\n" not in message
    if path.startswith("/v1/"):
        assert set(error) == {"message", "type", "param", "code"}
    else:
        assert set(r.json()) == {"error", "error_type"}
    assert httpx.get(server.url + "/health").status_code == 200  # no key needed, and still healthy


def test_metrics_count_requests_batches_and_errors(server, http, engines):
    from readout_sdk.serving.http.metrics import metric_value

    with ThreadPoolExecutor(8) as pool:  # concurrent requests: the batcher merges some of them
        replies = list(pool.map(lambda t: post(http, "/embed", {"inputs": [t]}).json()[0], TEXTS * 2))
    np.testing.assert_allclose(replies, engines["minilm"].embed(TEXTS * 2).vectors, atol=1e-6)
    assert httpx.get(server.url + "/metrics").status_code == 401
    preflight = httpx.options(server.url + "/embed", headers={"Origin": "http://app.example",
                                                             "Access-Control-Request-Method": "POST"})
    assert "access-control-allow-origin" not in preflight.headers  # CORS is off unless origins are named
    text = http.get("/metrics").text
    assert metric_value(text, "readout_http_requests_total", route="/embed", model="minilm", status=200) >= 2 * len(TEXTS)
    assert metric_value(text, "readout_batch_items_count", model="minilm") < metric_value(
        text, "readout_http_requests_total", route="/embed", model="minilm", status=200)
    assert metric_value(text, "readout_items_total", model="minilm") >= 2 * len(TEXTS)
    assert metric_value(text, "readout_http_errors_total", kind="unauthorized") >= 1
    assert metric_value(text, "readout_queue_items", model="minilm") == 0


# ---- back-pressure and draining -----------------------------------------------------------------
def test_overload_is_answered_429_a_gone_client_is_dropped_and_sigterm_drains(shared, engines):
    """A small queue: 64 concurrent clients; every answer is the SDK's vectors or a 429 with Retry-After,
    none lost. A client that gives up is counted as cancelled. Then SIGTERM while requests are in flight:
    each still gets its answer (some after the signal), and the server exits 0."""
    import time

    from readout_sdk.serving.http.metrics import metric_value

    texts = [f"{t} {u}" for t in TEXTS for u in TEXTS[:4]]
    want = {t: v for t, v in zip(texts, engines["minilm"].embed(texts).vectors)}
    long = [" ".join(TEXTS[k:] + TEXTS[:k]) for k in range(4)]  # each cut at 256 tokens: slow to run
    want_long = engines["minilm"].embed(long).vectors
    with HttpServer([f"minilm={shared('embedding')[1]}"], "--max-queue-items", "32", "--max-batch-items", "16",
                    "--max-wait-ms", "5", "--max-characters", "5000", "--max-tokens", "800",
                    "--cors-origin", "http://app.example") as s:
        assert s.url.startswith("http://127.0.0.1:")  # loopback unless --host says otherwise
        for doc, limit in (({"inputs": long * 2}, "--max-characters"), ({"inputs": ["alpha beta gamma delta"] * 150}, "--max-tokens")):
            r = httpx.post(s.url + "/embed", json=doc, timeout=60)
            assert r.status_code == 413 and limit in r.json()["error"], r.text
        preflight = {"Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization"}
        allowed = httpx.options(s.url + "/embed", headers={"Origin": "http://app.example", **preflight})
        other = httpx.options(s.url + "/embed", headers={"Origin": "http://evil.example", **preflight})
        assert allowed.headers.get("access-control-allow-origin") == "http://app.example"
        assert "access-control-allow-origin" not in other.headers
        def client(k: int) -> tuple[int, list[str], httpx.Response]:
            batch = [texts[(k * 7 + j) % len(texts)] for j in range(4)]
            return k, batch, httpx.post(s.url + "/v1/embeddings", json={"model": "minilm", "input": batch,
                                                                       "encoding_format": "base64"}, timeout=120)

        with ThreadPoolExecutor(64) as pool:
            outcomes = list(pool.map(client, range(256)))
        codes = [r.status_code for _, _, r in outcomes]
        assert set(codes) <= {200, 429} and codes.count(429) > 0 and codes.count(200) > 0
        for _, batch, r in outcomes:
            if r.status_code == 429:
                assert r.headers["retry-after"] == "1" and "--max-queue-items 32" in r.json()["error"]["message"]
                continue
            got = [np.frombuffer(base64.b64decode(d["embedding"]), "<f4") for d in r.json()["data"]]
            np.testing.assert_allclose(got, [want[t] for t in batch], atol=1e-6)

        def slow() -> tuple[httpx.Response, float]:
            r = httpx.post(s.url + "/embed", json={"inputs": long}, timeout=120)
            return r, time.monotonic()

        with ThreadPoolExecutor(8) as pool:  # 8 x 4 long inputs fill the queue of 32; one more client gives up
            busy = [pool.submit(slow) for _ in range(7)]
            time.sleep(0.1)
            with pytest.raises(httpx.TimeoutException):
                httpx.post(s.url + "/embed", json={"inputs": long}, timeout=0.05)
            [b.result() for b in busy]
            cancelled = metric_value(httpx.get(s.url + "/metrics").text, "readout_cancelled_requests_total",
                                     model="minilm")
            draining = [pool.submit(slow) for _ in range(8)]
            deadline = time.monotonic() + 20
            waiting = 0.0
            while waiting < 12 and time.monotonic() < deadline:  # a batch runs and >= 3 requests wait behind it
                waiting = metric_value(httpx.get(s.url + "/metrics").text, "readout_queue_items", model="minilm")
            signalled = time.monotonic()
            code = s.stop()
            answers = [f.exception() or f.result() for f in draining]
    assert cancelled == 1
    assert code == 0 and waiting >= 12
    done = [a for a in answers if not isinstance(a, Exception)]
    # every request the server held was answered, some after the signal; only ones not yet accepted are refused
    assert all(isinstance(a, httpx.ConnectError) for a in answers if isinstance(a, Exception)), answers
    assert [r.status_code for r, _ in done] == [200] * len(done)
    assert sum(t > signalled for _, t in done) >= 3
    for r, _ in done:
        np.testing.assert_allclose(r.json(), want_long, atol=1e-6)


# ---- the docs' client examples -------------------------------------------------------------------
def test_the_docs_client_examples_run_against_a_live_server(server, tmp_path):
    """docs/serving.md's ``server`` blocks, as shown, with the address and key of this server."""
    import os
    import subprocess
    import sys

    from helpers.docblocks import ROOT, blocks

    # the suite's HF_HUB_OFFLINE=1 (TRANSFORMERS_OFFLINE too) would stop huggingface_hub's client; the examples reach only this server
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}

    examples = [b for b in blocks(ROOT / "docs" / "serving.md") if b.mode == "server"]
    assert {b.language for b in examples} >= {"python", "bash"} and len(examples) >= 4
    for b in examples:
        code = b.code.replace("http://127.0.0.1:8080", server.url).replace("my-secret-key", KEY)
        cmd = [sys.executable, "-c", code] if b.language == "python" else ["bash", "-euo", "pipefail", "-c", code]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
        assert r.returncode == 0, f"{b.where}: {r.stderr[-2000:]}"
