"""`readout-export serve`: a real Triton server (PyTriton) started as a user would, on loopback; several
clients send concurrent requests over tritonclient HTTP and gRPC; every typed result must equal the SDK's
run directly, in order, with none lost; a refused request fails alone; SIGTERM stops everything.

Models: SYNTHETIC tiny BERT classifier and cross-encoder, REAL all-MiniLM-L6-v2 (embeddings)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http

import readout_sdk
from helpers.corpus import PAIRS, TEXTS
from helpers.triton_server import ServeProcess, fan_out, infer

def concurrently(served: ServeProcess, requests: list[dict[str, list[str]]], clients: int = 6) -> list[list[dict]]:
    """Send ``requests`` from ``clients`` threads (odd ones HTTP, even gRPC), each in turn; replies by index."""
    def client(c: int) -> dict[int, list[dict]]:
        protocol = "http" if c % 2 else "grpc"
        return {i: infer(served.url(protocol), "m", requests[i], protocol) for i in range(c, len(requests), clients)}

    outcomes = fan_out(client, clients)
    errors = [o for o in outcomes.values() if isinstance(o, Exception)]
    assert not errors, errors[:3]
    replies = {i: r for o in outcomes.values() for i, r in o.items()}
    return [replies[i] for i in range(len(requests))]


def test_concurrent_clients_get_the_sdks_classifications_in_order(shared, tmp_path):
    art = shared("classify")[1]
    engine = readout_sdk.load(art, target="onnx-fp32")
    rng = np.random.default_rng(0)
    pool = TEXTS + [t.upper() for t in TEXTS] + [f"{a} {b}" for a, b in zip(TEXTS, TEXTS[3:])]
    requests = [{"text": [pool[k] for k in rng.integers(0, len(pool), rng.integers(1, 9))]} for _ in range(60)]
    with ServeProcess(art, tmp_path / "triton.log", "--target", "onnx-fp32") as served:
        replies = concurrently(served, requests)
        counters = served.counters()
        # Triton's dynamic batcher merged concurrent requests: fewer model executions than requests
        assert counters["nv_inference_request_success"] == len(requests)
        assert counters["nv_inference_exec_count"] < len(requests)
        config = tritonclient.http.InferenceServerClient(served.url("http")).get_model_config("m")
        assert config["max_batch_size"] == 64 and config["dynamic_batching"]["max_queue_delay_microseconds"] == 2000
        # every reply says which release answered it
        assert [o["name"] for o in config["output"]] == ["result", "release_id"]
        inp = tritonclient.http.InferInput("text", [2, 1], "BYTES")
        inp.set_data_from_numpy(np.array([[b"fine"], [b"awful"]], dtype=object))
        reply = tritonclient.http.InferenceServerClient(served.url("http")).infer("m", [inp])
        assert [r[0].decode() for r in reply.as_numpy("release_id")] == [engine.release_id] * 2
        # a request the SDK refuses gets error records; the requests batched with it are untouched
        bad_and_good = concurrently(served, [{"text": ["fine", "   "]}, {"text": ["fine"]}] * 4, clients=8)
        code = served.stop()
    assert code == 0
    rows = 0
    for request, reply in zip(requests, replies):
        expected = engine.classify(request["text"])
        assert len(reply) == len(expected)
        for rec, exp in zip(reply, expected):
            assert rec["label"] == exp.label and rec["truncated"] == exp.truncated
            assert rec["scores"] == pytest.approx(exp.scores, abs=1e-6)
            assert set(rec["scores"]) == set(engine.labels)
        rows += len(reply)
    assert rows == sum(len(r["text"]) for r in requests)  # none lost, none duplicated
    for i, reply in enumerate(bad_and_good):
        if i % 2 == 0:
            assert all("no content tokens" in r["error"] for r in reply)
        else:
            assert reply[0]["label"] == engine.classify(["fine"])[0].label
    still = subprocess.run(["pgrep", "-af", "tritonserver|triton_python_backend_stub"], capture_output=True,
                           text=True).stdout
    assert str(served.http) not in still and "m_0_0" not in still, f"left running after SIGTERM: {still}"


def test_pairs_and_real_embeddings_over_grpc_and_http(shared, tmp_path):
    cross = shared("cross")[1]
    engine = readout_sdk.load(cross, target="onnx-fp32")
    queries, docs = zip(*PAIRS)
    with ServeProcess(cross, tmp_path / "cross.log", "--target", "onnx-fp32") as served:
        replies = concurrently(served, [{"query": list(queries[i::3]), "document": list(docs[i::3])} for i in range(3)], 3)
        with pytest.raises(Exception, match=r"missing required input\(s\) \['document'\]"):
            infer(served.url("http"), "m", {"query": ["q"]})  # Triton itself refuses a request without every field
        # the docs' client (examples/serving/client.py) learns the fields from the server: rows of two values
        client = [sys.executable, str(Path(__file__).resolve().parents[2] / "examples" / "serving" / "client.py"), "m",
                  "--url", served.url("http")]
        done = subprocess.run([*client, queries[0], docs[0], queries[1], docs[1]], capture_output=True, text=True,
                              timeout=120)
        odd = subprocess.run([*client, queries[0], docs[0], queries[1]], capture_output=True, text=True, timeout=120)
        assert served.stop() == 0
    assert done.returncode == 0, done.stderr
    records = [json.loads(line.split("  <-", 1)[0]) for line in done.stdout.splitlines()[:2]]
    want = engine.score_pairs([(queries[0], docs[0]), (queries[1], docs[1])])
    assert [r["score"] for r in records] == pytest.approx([w.score for w in want], abs=1e-6)
    assert done.stdout.splitlines()[2] == f"release: {engine.release_id}"
    assert odd.returncode == 2 and odd.stderr.startswith("error: m takes rows of 2 values (query, document)"), odd.stderr
    for i, reply in enumerate(replies):
        expected = engine.score_pairs(list(zip(queries[i::3], docs[i::3])))
        assert [r["score"] for r in reply] == pytest.approx([e.score for e in expected], abs=1e-6)

    minilm = shared("embedding")[1]  # REAL all-MiniLM-L6-v2
    engine = readout_sdk.load(minilm, target="onnx-fp32")
    with ServeProcess(minilm, tmp_path / "minilm.log", "--target", "onnx-fp32") as served:
        replies = concurrently(served, [{"text": TEXTS[i::4]} for i in range(4)], 4)
        assert served.stop() == 0
    for i, reply in enumerate(replies):
        expected = engine.embed(TEXTS[i::4]).vectors
        got = np.array([r["embedding"] for r in reply], dtype=np.float32)
        assert got.shape == expected.shape and np.abs(got - expected).max() < 1e-5
