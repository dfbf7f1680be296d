"""Start the Triton Inference Server that nvidia-pytriton bundles, on loopback, for tests and benchmarks.

PyTriton's wheel ships `tritonserver` with only the Python backend. To run a generated repository here,
:func:`stand_in_graph` swaps the graph model's backend (ONNX Runtime, not bundled) for a small Python
model that runs the same model.onnx with onnxruntime: Triton, the generated config's tensors, dynamic
batching, BLS and the SDK's Python model are all real; only the graph model's backend is substituted.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

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
        import tritonclient.http as http

        self.process = subprocess.Popen(self.cmd, env=self.env, stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        client = http.InferenceServerClient(self.http_url)
        deadline = time.time() + 120
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"tritonserver exited ({self.process.returncode}):\n{self.log.read_text()[-4000:]}")
            try:
                if client.is_server_ready():
                    return self
            except Exception:
                pass
            time.sleep(0.3)
        raise RuntimeError(f"tritonserver not ready in 120 s:\n{self.log.read_text()[-4000:]}")

    def __exit__(self, *exc) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
