"""`readout-export serve`: a real Triton server (PyTriton) started as a user would, on loopback; several
clients send concurrent requests over tritonclient HTTP and gRPC; every typed result must equal the SDK's
run directly, in order, with none lost; a refused request fails alone; SIGTERM stops everything.

Models: SYNTHETIC tiny BERT classifier and cross-encoder, REAL all-MiniLM-L6-v2 (embeddings)."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http

import readout_sdk
from corpus import PAIRS, TEXTS
from triton_server import free_ports

READOUT_EXPORT = str(Path(sys.executable).parent / "readout-export")


class Served:
    """`readout-export serve ARTIFACT` in a subprocess; waits until Triton reports the model ready."""

    def __init__(self, artifact: Path, log: Path, *extra: str):
        self.http, self.grpc, self.metrics = free_ports(3)
        self.cmd = [READOUT_EXPORT, "serve", str(artifact), "--name", "m", "--http-port", str(self.http),
                    "--grpc-port", str(self.grpc), "--metrics-port", str(self.metrics), "--log-file", str(log), *extra]
        self.log = log

    def __enter__(self) -> "Served":
        import tritonclient.http as http

        self.process = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        client = http.InferenceServerClient(f"127.0.0.1:{self.http}")
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"serve exited {self.process.returncode}: {self.process.stdout.read()}")
            try:
                if client.is_model_ready("m"):
                    return self
            except Exception:
                pass
            time.sleep(0.3)
        raise RuntimeError("serve not ready in 120 s")

    def counters(self) -> dict[str, float]:
        """Triton's Prometheus counters for model m (requests served, model executions)."""
        import re
        import urllib.request

        text = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics}/metrics", timeout=10).read().decode()
        return {m.group(1): float(m.group(2))
                for m in re.finditer(r'^(nv_inference_\w+)\{model="m",version="1"\} (\S+)$', text, re.M)}

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(60)

    def __exit__(self, *exc) -> None:
        if self.process.poll() is None:
            self.process.kill()


def call(protocol: str, port: int, fields: dict[str, list[str]]) -> list[dict]:
    import tritonclient.grpc as grpc
    import tritonclient.http as http

    mod = http if protocol == "http" else grpc
    client = mod.InferenceServerClient(f"127.0.0.1:{port}")
    inputs = []
    for name, values in fields.items():
        t = mod.InferInput(name, [len(values), 1], "BYTES")
        t.set_data_from_numpy(np.array([[v.encode("utf-8")] for v in values], dtype=object))
        inputs.append(t)
    return [json.loads(r[0]) for r in client.infer("m", inputs).as_numpy("result")]


def concurrently(served: Served, requests: list[dict[str, list[str]]], clients: int = 6) -> list[list[dict]]:
    """Send ``requests`` from ``clients`` threads (odd ones HTTP, even gRPC); replies by request index."""
    replies: dict[int, list[dict]] = {}
    errors: list[BaseException] = []

    def worker(c: int) -> None:
        for i in range(c, len(requests), clients):
            try:
                replies[i] = call("http" if c % 2 else "grpc", served.http if c % 2 else served.grpc, requests[i])
            except BaseException as e:  # noqa: BLE001 - reported by the test
                errors.append(e)

    threads = [threading.Thread(target=worker, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    return [replies[i] for i in range(len(requests))]


def test_concurrent_clients_get_the_sdks_classifications_in_order(shared, tmp_path):
    art = shared("classify")[1]
    engine = readout_sdk.load(art, target="onnx-fp32")
    rng = np.random.default_rng(0)
    pool = TEXTS + [t.upper() for t in TEXTS] + [f"{a} {b}" for a, b in zip(TEXTS, TEXTS[3:])]
    requests = [{"text": [pool[k] for k in rng.integers(0, len(pool), rng.integers(1, 9))]} for _ in range(60)]
    with Served(art, tmp_path / "triton.log", "--target", "onnx-fp32") as served:
        replies = concurrently(served, requests)
        counters = served.counters()
        # Triton's dynamic batcher merged concurrent requests: fewer model executions than requests
        assert counters["nv_inference_request_success"] == len(requests)
        assert counters["nv_inference_exec_count"] < len(requests)
        config = tritonclient.http.InferenceServerClient(f"127.0.0.1:{served.http}").get_model_config("m")
        assert config["max_batch_size"] == 64 and config["dynamic_batching"]["max_queue_delay_microseconds"] == 2000
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
    with Served(cross, tmp_path / "cross.log", "--target", "onnx-fp32") as served:
        replies = concurrently(served, [{"query": list(queries[i::3]), "document": list(docs[i::3])} for i in range(3)], 3)
        with pytest.raises(Exception, match=r"missing required input\(s\) \['document'\]"):
            call("http", served.http, {"query": ["q"]})  # Triton itself refuses a request without every field
        assert served.stop() == 0
    for i, reply in enumerate(replies):
        expected = engine.score_pairs(list(zip(queries[i::3], docs[i::3])))
        assert [r["score"] for r in reply] == pytest.approx([e.score for e in expected], abs=1e-6)

    minilm = shared("embedding")[1]  # REAL all-MiniLM-L6-v2
    engine = readout_sdk.load(minilm, target="onnx-fp32")
    with Served(minilm, tmp_path / "minilm.log", "--target", "onnx-fp32") as served:
        replies = concurrently(served, [{"text": TEXTS[i::4]} for i in range(4)], 4)
        assert served.stop() == 0
    for i, reply in enumerate(replies):
        expected = engine.embed(TEXTS[i::4]).vectors
        got = np.array([r["embedding"] for r in reply], dtype=np.float32)
        assert got.shape == expected.shape and np.abs(got - expected).max() < 1e-5
