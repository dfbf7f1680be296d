"""Triton on loopback for tests and benchmarks: the server nvidia-pytriton bundles (:class:`TritonServer`),
`readout-export serve` as a user starts it (:class:`ServeProcess`), and the client side both use
(:func:`infer`, :func:`wait_ready`, :func:`fan_out`).

PyTriton's wheel ships `tritonserver` with only the Python backend. To run a generated repository here,
:func:`stand_in_graph` swaps the graph model's backend (ONNX Runtime, not bundled) for a small Python
model that runs the same model.onnx with onnxruntime: Triton, the generated config's tensors, dynamic
batching, BLS and the SDK's Python model are all real; only the graph model's backend is substituted.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

STAND_IN = '''
import numpy as np, onnxruntime as ort, triton_python_backend_utils as pb
from pathlib import Path

class TritonPythonModel:
    def initialize(self, args):
        import json
        path = Path(args["model_repository"]) / args["model_version"] / "model.onnx"
        self.session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.outputs = [o["name"] for o in json.loads(args["model_config"])["output"]]

    def execute(self, requests):
        replies = []
        for r in requests:
            feed = {n: pb.get_input_tensor_by_name(r, n).as_numpy() for n in self.inputs}
            names = r.requested_output_names() or self.outputs
            outs = self.session.run(list(names), feed)
            replies.append(pb.InferenceResponse([pb.Tensor(n, o) for n, o in zip(names, outs)]))
        return replies
'''


def free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def stand_in_graph(model_dir: Path) -> None:
    """Run ``model_dir`` (an onnxruntime_onnx model) on the Python backend instead, same tensors."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    cfg = text_format.Parse((model_dir / "config.pbtxt").read_text(), model_config_pb2.ModelConfig())
    assert cfg.platform == "onnxruntime_onnx"
    cfg.platform = ""
    cfg.backend = "python"
    (model_dir / "config.pbtxt").write_text(text_format.MessageToString(cfg))
    (model_dir / "1" / "model.py").write_text(STAND_IN)


class TritonServer:
    """``tritonserver --model-repository REPO`` on free loopback ports; a context manager."""

    def __init__(self, repo: Path, workdir: Path):
        import pytriton

        dist = Path(pytriton.__file__).parent / "tritonserver"
        self.backends = workdir / "backends"
        shutil.copytree(dist / "backends", self.backends)
        version = f"{sys.version_info[0]}.{sys.version_info[1]}"
        shutil.copy(dist / "python_backend_stubs" / version / "triton_python_backend_stub",
                    self.backends / "python" / "triton_python_backend_stub")
        self.http_port, self.grpc_port, self.metrics_port = free_ports(3)
        env = dict(os.environ)
        from pytriton.utils.distribution import get_libs_path

        env["LD_LIBRARY_PATH"] = os.pathsep.join([sysconfig.get_config_var("LIBDIR"), str(get_libs_path()),
                                                  env.get("LD_LIBRARY_PATH", "")])
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        self.log = workdir / "tritonserver.log"
        self.cmd = [str(dist / "bin" / "tritonserver"), f"--model-repository={repo}",
                    f"--backend-directory={self.backends}", "--http-address=127.0.0.1", f"--http-port={self.http_port}",
                    "--grpc-address=127.0.0.1", f"--grpc-port={self.grpc_port}", f"--metrics-port={self.metrics_port}",
                    "--allow-metrics=false", "--exit-timeout-secs=5", "--strict-readiness=true"]
        self.env = env
        self.process: subprocess.Popen | None = None

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    def __enter__(self) -> "TritonServer":
        self.process = subprocess.Popen(self.cmd, env=self.env, stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        wait_ready(self.http_url, None, self.process, self.log)
        return self

    def __exit__(self, *exc) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()


class ServeProcess:
    """`readout-export serve ARTIFACT --name m` in a subprocess on free ports, ready when Triton says model m is."""

    def __init__(self, artifact: Path, log: Path, *extra: str):
        self.http, self.grpc, self.metrics = free_ports(3)
        readout_export = str(Path(sys.executable).parent / "readout-export")
        self.cmd = [readout_export, "serve", str(artifact), "--name", "m", "--http-port", str(self.http),
                    "--grpc-port", str(self.grpc), "--metrics-port", str(self.metrics), "--log-file", str(log), *extra]
        self.log = log

    def __enter__(self) -> "ServeProcess":
        self.process = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wait_ready(f"127.0.0.1:{self.http}", "m", self.process, self.log)
        return self

    def url(self, protocol: str) -> str:
        return f"127.0.0.1:{self.http if protocol == 'http' else self.grpc}"

    def counters(self) -> dict[str, float]:
        """Triton's Prometheus counters for model m (requests served, model executions)."""
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


def wait_ready(http_url: str, model: str | None, process: subprocess.Popen, log: Path | None = None,
               timeout: float = 120) -> None:
    """Poll until the server (or ``model`` on it) is ready; fail with the log if the process exits first."""
    import tritonclient.http as http

    client = http.InferenceServerClient(http_url)
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            tail = log.read_text()[-4000:] if log and log.exists() else ""
            raise RuntimeError(f"{process.args[0]} exited ({process.returncode}):\n{tail}")
        try:
            if client.is_model_ready(model) if model else client.is_server_ready():
                return
        except Exception:  # noqa: BLE001 - not listening yet
            pass
        time.sleep(0.3)
    raise RuntimeError(f"not ready in {timeout:.0f} s")


def infer(url: str, model: str, fields: dict[str, list[str]], protocol: str = "http") -> list[dict]:
    """One request of BYTES fields ``[n, 1]``; the ``result`` records it returns, decoded."""
    import tritonclient.grpc as grpc
    import tritonclient.http as http

    mod = http if protocol == "http" else grpc
    inputs = []
    for name, values in fields.items():
        t = mod.InferInput(name, [len(values), 1], "BYTES")
        t.set_data_from_numpy(np.array([[v.encode("utf-8")] for v in values], dtype=object))
        inputs.append(t)
    result = mod.InferenceServerClient(url).infer(model, inputs)
    return [json.loads(r[0]) for r in result.as_numpy("result")]


def fan_out(fn: Callable[[int], Any], count: int) -> dict[int, Any]:
    """``fn(0..count-1)`` on ``count`` threads at once; each one's result, or the exception it raised."""
    outcomes: dict[int, Any] = {}

    def run(i: int) -> None:
        try:
            outcomes[i] = fn(i)
        except Exception as e:  # noqa: BLE001 - the caller decides
            outcomes[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outcomes
