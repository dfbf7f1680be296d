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


@pytest.mark.heavy
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


@pytest.mark.heavy
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


# ---- what the user's terminal shows (issue 35: one line per state change; Triton's own log in a file) ----

def serve_command(artifact: Path, http: int, grpc: int, metrics: int, *extra: str) -> list[str]:
    return [str(Path(sys.executable).parent / "readout-export"), "serve", str(artifact), "--name", "m",
            "--http-port", str(http), "--grpc-port", str(grpc), "--metrics-port", str(metrics), "--target", "onnx-fp32",
            *extra]


@pytest.mark.heavy
def test_the_terminal_gets_one_line_per_state_and_tritons_log_goes_to_a_file_by_default(shared, tmp_path):
    """Without --log-file: five lines on stderr (starting, naming the log file; loading; ready; stopping;
    stopped), nothing on stdout; the ~60 lines Triton prints (its E and W lines included) are all in
    $XDG_STATE_HOME/readout-export/serve/m-PORT.log."""
    import os
    import signal

    from helpers.triton_server import free_ports, wait_ready

    art = shared("classify")[1]
    http, grpc, metrics = free_ports(3)
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    proc = subprocess.Popen(serve_command(art, http, grpc, metrics), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    try:
        wait_ready(f"127.0.0.1:{http}", "m", proc)
        assert infer(f"127.0.0.1:{http}", "m", {"text": ["fine"]})[0]["label"]
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    log = tmp_path / "state" / "readout-export" / "serve" / f"m-{http}.log"
    assert proc.returncode == 0, err
    assert out == ""
    assert err.splitlines() == [
        f"starting Triton for m (sequence_classification, onnx-fp32 on onnxruntime); its log: {log}",
        "loading m into Triton",
        f"ready: m at http://127.0.0.1:{http} and grpc 127.0.0.1:{grpc}; inputs: text; output: result (JSON)",
        "stopping (SIGINT)",
        "stopped",
    ]
    text = log.read_text()
    assert f"Started HTTPService at 127.0.0.1:{http}" in text and "successfully loaded 'm'" in text
    assert "Signal (2) received." in text  # the shutdown's lines too


def test_a_server_that_fails_to_start_says_why_from_its_log_and_exits_1_at_once(shared, tmp_path):
    """Port HTTP held (bound, not answering, so the pre-check passes): Triton starts, cannot listen and
    exits. serve reports `failed:` with Triton's own error line, well before PyTriton's 2-minute wait, and
    leaves no server behind."""
    import socket
    import time

    from helpers.triton_server import free_ports

    art = shared("classify")[1]
    http, grpc, metrics = free_ports(3)
    log = tmp_path / "triton.log"
    with socket.socket() as held:
        held.bind(("127.0.0.1", http))
        start = time.monotonic()
        done = subprocess.run(serve_command(art, http, grpc, metrics, "--log-file", str(log)), capture_output=True,
                              text=True, timeout=180)
        took = time.monotonic() - start
    lines = done.stderr.splitlines()
    assert done.returncode == 1, done.stderr
    assert took < 60, took
    assert lines[0] == f"starting Triton for m (sequence_classification, onnx-fp32 on onnxruntime); its log: {log}"
    assert lines[1] == f"failed: Triton exited (code 1) before m was ready; the last lines of Triton's log ({log}):"
    assert 1 <= len(lines[2:]) <= 6 and all(line.startswith("    ") for line in lines[2:]), lines
    assert any(f"127.0.0.1:{http}" in line and "HTTP" in line for line in lines[2:]), lines
    assert not any(harmless in done.stderr for harmless in ("NVML", "DCGM", "Traceback", "unexpected failure"))
    still = subprocess.run(["pgrep", "-af", "tritonserver"], capture_output=True, text=True).stdout
    assert f"--http-port={http}" not in still, still


def test_what_serve_can_tell_before_starting_is_one_error_line_and_exit_2(shared, tmp_path):
    """A port something answers on, ports that coincide, an unwritable log file: refused before Triton
    starts (no log written), one `error:` line naming the option."""
    import socket

    from helpers.triton_server import free_ports

    art = shared("classify")[1]
    http, grpc, metrics = free_ports(3)
    log = tmp_path / "triton.log"
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", grpc))
        taken.listen()
        busy = subprocess.run(serve_command(art, http, grpc, metrics, "--log-file", str(log)), capture_output=True,
                              text=True, timeout=120)
    same = subprocess.run(serve_command(art, http, http, metrics, "--log-file", str(log)), capture_output=True,
                          text=True, timeout=120)
    (tmp_path / "file").write_text("")
    unwritable = subprocess.run(serve_command(art, http, grpc, metrics, "--log-file", str(tmp_path / "file" / "x.log")),
                                capture_output=True, text=True, timeout=120)
    assert (busy.returncode, same.returncode, unwritable.returncode) == (2, 2, 2)
    assert busy.stderr == (f"error: --grpc-port {grpc}: something already answers on 127.0.0.1:{grpc} (another "
                           f"server?); stop it or choose another port with --grpc-port\n")
    assert same.stderr.startswith("error: --http-port, --grpc-port and --metrics-port must differ")
    assert unwritable.stderr.startswith(f"error: cannot write Triton's log to {tmp_path / 'file' / 'x.log'}")
    assert all(len(d.stderr.splitlines()) == 1 and d.stdout == "" for d in (busy, same, unwritable))
    assert not log.exists()


def test_server_log_keeps_whole_lines_and_quotes_the_relevant_ones(tmp_path):
    """PyTriton hands the server's output over unbuffered (a line in pieces): the file gets it as written,
    the loading callback fires once, and a failure quotes the last E/W lines that are not the usual
    harmless ones (no GPU found, PyTriton's config notice, Ctrl-C), without Triton's timestamp prefix."""
    from readout_sdk.serving.serve import ServerLog

    text = ('W1205 07:26:52.168260 5598 pinned_memory_manager.cc:273] "Unable to allocate pinned system memory, '
            'pinned memory pool will not be available: CUDA driver version is insufficient"\n'
            'E1205 07:26:52.168387 5598 server.cc:241] "CudaDriverHelper has not been initialized."\n'
            "Error: Failed to initialize NVML\n"
            'W1205 07:26:52.174108 5598 metrics.cc:798] "DCGM unable to start: DCGM initialization error"\n'
            'I1205 07:26:52.179391 5598 http_server.cc:4713] "Started HTTPService at 127.0.0.1:8000"\n'
            'E1205 07:26:52.838688 5598 model_repository_manager.cc:470] "Failed to set config modification time: '
            'model_config_content_name_ is empty"\n'
            'I1205 07:26:52.839010 5598 model_lifecycle.cc:472] "loading: m:1"\n'
            'E1205 07:26:53.000000 5598 main.cc:257] "failed to start HTTP service: Unavailable - Socket '
            "'127.0.0.1:8000' already in use \"\n"
            "Signal (2) received.\n")
    loading = []
    log = ServerLog(tmp_path / "sub" / "t.log", "m", lambda: loading.append(1))
    for ch in text:
        log.write(ch.encode())
    log.write_line("pytriton WARNING pytriton.server.triton_server: Triton Inference Server exited with failure. "
                   "Please wait.")
    log.close()
    log.write("after close is dropped\n")
    assert loading == [1]
    assert (tmp_path / "sub" / "t.log").read_text().startswith(text)
    assert log.relevant() == ("E: \"failed to start HTTP service: Unavailable - Socket '127.0.0.1:8000' already in "
                              "use \"",)


def test_pytritons_own_warnings_go_to_the_log_and_others_still_show(tmp_path):
    """PyTriton warns through Python's `warnings` too (a CleanupWarning when its workspace is already gone
    on stop): while serve runs, such a warning is a line in the server log, never two lines on the
    terminal after `failed:`; a warning of anyone else is still shown."""
    import warnings

    from pytriton.utils.workspace import CleanupWarning

    from readout_sdk.serving.serve import ServerLog, _pytriton_warnings_into

    log = ServerLog(tmp_path / "t.log", "m", lambda: None)
    with warnings.catch_warnings(record=True) as shown:  # what would reach the terminal
        warnings.simplefilter("always")
        with _pytriton_warnings_into(log):
            warnings.warn("Could not clean workspace /x. [Errno 2] No such file", CleanupWarning)
            warnings.warn("someone else's", UserWarning)
        log.close()
    assert [str(w.message) for w in shown] == ["someone else's"]
    assert "pytriton warning CleanupWarning: Could not clean workspace /x." in (tmp_path / "t.log").read_text()
