"""The thin SDK in a fresh virtual environment: the base install alone refuses to load, in one line naming
the two ONNX Runtime extras; with the `cpu` extra it loads an artifact and returns typed results, and torch /
transformers are not even importable there. With the `gpu` extra (marker gpu_wheel: a 250 MB download) the
environment holds exactly one ONNX Runtime, the GPU wheel, and on this machine without a GPU it runs on the
CPU, saying why, with no runtime banner."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys, importlib.util
import readout_sdk
engine = readout_sdk.load(sys.argv[1])
result = engine.classify(["a fine day", "a terrible day"], top_k=2)
assert [r.label for r in result] and all(r.score_kind == "probability" for r in result)
missing = [m for m in ("torch", "transformers", "sentence_transformers", "onnx") if importlib.util.find_spec(m) is None]
print(result[0].label, sorted(missing))
"""


NO_RUNTIME = """
import sys
import readout_sdk
try:
    readout_sdk.load(sys.argv[1])
except readout_sdk.DeviceUnavailable as e:
    print(e)
else:
    raise SystemExit("loaded without an ONNX Runtime")
"""


def _venv(tmp_path: Path, extras: str = "") -> Path:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    _pip(python, f"{ROOT}{extras}")
    return python


def _pip(python: Path, *args: str) -> None:
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", *args], capture_output=True, text=True,
                          timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.heavy
def test_base_install_gives_typed_results_without_torch(shared, tmp_path):
    artifact = shared("classify")[1]
    python = _venv(tmp_path)
    refused = subprocess.run([str(python), "-c", NO_RUNTIME, str(artifact)], capture_output=True, text=True,
                             timeout=300)
    assert refused.returncode == 0, refused.stderr[-3000:]
    assert refused.stdout.startswith("ONNX Runtime is not installed: pip install 'readout-export[cpu]'")
    assert "'readout-export[gpu]'" in refused.stdout and len(refused.stdout.strip().splitlines()) == 1
    _pip(python, f"{ROOT}[cpu]")
    run = subprocess.run([str(python), "-c", SCRIPT, str(artifact)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    label, missing = run.stdout.split(" ", 1)
    assert label in ("negative", "neutral", "positive")
    assert missing.strip() == str(sorted(["torch", "transformers", "sentence_transformers", "onnx"]))


GPU_WHEEL = """
import sys, importlib.metadata as md
import onnxruntime as ort
import readout_sdk
owners = sorted(d.metadata["Name"] for d in md.distributions()
                if any(str(f) == "onnxruntime/__init__.py" for f in d.files or ()))
engine = readout_sdk.load(sys.argv[1])
result = engine.classify(["a fine day"])
try:
    readout_sdk.load(sys.argv[1], device="cuda")
    refusal = "loaded"
except readout_sdk.DeviceUnavailable as e:
    refusal = str(e)
print(owners, "CUDAExecutionProvider" in ort.get_available_providers(), engine.device, result[0].label, sep="\\n")
print(engine.choice_reason)
print(refusal)
"""


@pytest.mark.gpu_wheel
def test_gpu_extra_installs_one_onnxruntime_that_runs_here_without_a_gpu(shared, tmp_path):
    artifact = shared("classify")[1]
    python = _venv(tmp_path, "[gpu]")
    check = subprocess.run([str(python), "-m", "pip", "check"], capture_output=True, text=True, timeout=300)
    assert check.returncode == 0, check.stdout
    run = subprocess.run([str(python), "-c", GPU_WHEEL, str(artifact)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    owners, has_cuda, device, label, reason, refusal = run.stdout.strip().split("\n")
    assert owners == "['onnxruntime-gpu']" and has_cuda == "True"  # one ONNX Runtime, the GPU wheel
    assert device == "cpu" and label in ("negative", "neutral", "positive")
    assert "runs on CPUExecutionProvider; CUDA not used: " in reason
    assert refusal.startswith("device 'cuda' cannot be used: ") and "\n" not in refusal
    assert "EP Error" not in run.stderr and "Falling back" not in run.stderr, run.stderr[-2000:]
