"""What a GPU load asks ONNX Runtime for, checked without a GPU: fp32 means fp32 (TF32 off on CUDA, and
no TensorRT provider, whose fp32 layers are TF32), TF32 only for the target that declares it (onnx-tf32,
gated on its own budget), and TensorRT's provider only where its library loads (ONNX Runtime lists it
either way, then prints a page of "EP Error" and falls back). The CUDA option name is ONNX Runtime's
documented ``use_tf32``. Model: a SYNTHETIC tiny BERT sentiment classifier (tests/helpers/synthetic.py)."""
from __future__ import annotations

import json
from pathlib import Path

import onnxruntime as ort
import pytest

import readout_sdk
from helpers import synthetic
from helpers.corpus import TEXTS
from readout_parity import run_parity
from readout_sdk import runners

ROOT = Path(__file__).resolve().parents[2]
GPU = ["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"]


@pytest.fixture
def gpu_listed(monkeypatch):
    """onnxruntime-gpu's provider list, as it reports it whether or not TensorRT is installed, on a machine
    where CUDA can run (its provider library loads and the driver shows a GPU)."""
    monkeypatch.setattr(ort, "get_available_providers", lambda: list(GPU))
    monkeypatch.setattr(runners, "cuda_problem", lambda: None)


def test_the_gpu_wheel_without_a_gpu_runs_on_the_cpu_and_says_why(monkeypatch, tmp_path):
    """onnxruntime-gpu lists CUDA on any machine; without a GPU (here: no NVIDIA driver, and this
    onnxruntime has no CUDA provider library) ONNX Runtime is never asked for it: "cuda" is refused in one
    line, "auto" runs on the CPU with the reason noted."""
    monkeypatch.setattr(ort, "get_available_providers", lambda: list(GPU))
    count, why = runners.cuda_device_count()
    assert count == 0 and why  # this machine: no driver
    problem = runners.cuda_problem()
    assert problem and "CUDA provider" in problem
    with pytest.raises(readout_sdk.DeviceUnavailable, match=f"^device 'cuda' cannot be used: {problem[:20]}"):
        runners.providers_for("cuda", None, tmp_path)
    notes: list[str] = []
    assert runners.providers_for("auto", None, tmp_path, notes=notes) == ["CPUExecutionProvider"]
    assert notes == [f"CUDA not used: {problem}"]
    assert not runners.gpu_available()


def _names(providers):
    return [p[0] if isinstance(p, tuple) else p for p in providers]


def test_fp32_runs_with_tf32_off_and_without_tensorrt(gpu_listed, tmp_path):
    notes: list[str] = []
    providers = runners.providers_for("cuda", {"input": {"max_length": 8}, "inputs": []}, tmp_path, tf32=False,
                                      notes=notes)
    assert providers == [("CUDAExecutionProvider", {"use_tf32": "0"}), "CPUExecutionProvider"]
    assert notes and "TF32" in notes[0]


def test_tensorrt_provider_only_where_its_library_loads(gpu_listed, tmp_path, monkeypatch):
    record = {"input": {"max_length": 8}, "inputs": [{"name": "input_ids", "axes": ["batch", "sequence"]}]}
    notes: list[str] = []
    # this machine's onnxruntime has no TensorRT provider library: the real check says so
    assert runners.tensorrt_provider_problem() is not None
    providers = runners.providers_for("cuda", record, tmp_path, tf32=True, notes=notes)
    assert _names(providers) == ["CUDAExecutionProvider", "CPUExecutionProvider"]
    assert providers[0][1] == {"use_tf32": "1"} and "TensorRT provider not used" in notes[0]
    monkeypatch.setattr(runners, "tensorrt_provider_problem", lambda: None)  # where TensorRT loads
    providers = runners.providers_for("cuda", record, tmp_path, tf32=True)
    assert _names(providers) == GPU and providers[0][1]["trt_profile_max_shapes"] == "input_ids:256x8"
    assert runners.providers_for("cpu", record, tmp_path, tf32=True) == ["CPUExecutionProvider"]


@pytest.fixture(scope="module")
def tf32_artifact(tmp_path_factory):
    return synthetic.build_classifier(tmp_path_factory.mktemp("tf32"), [
        {"format": "onnx", "precision": "fp32"}, {"format": "onnx", "precision": "tf32"}])[1]


def test_tf32_is_a_target_a_user_chooses_with_its_own_budget(tf32_artifact):
    meta = json.loads((tf32_artifact / "readout.json").read_text())
    files = {(t["precision"], t["runtime"]): t["file"] for t in meta["targets"]}
    assert files == {("fp32", "onnxruntime"): "model.onnx-fp32.onnx", ("tf32", "onnxruntime"): "model.onnx-fp32.onnx"}
    default = readout_sdk.load(tf32_artifact, device="cpu")
    assert default.target.name == "onnx-fp32"  # never picked unless asked for
    chosen = readout_sdk.load(tf32_artifact, device="cpu", precision="tf32")
    assert chosen.target.name == "onnx-tf32" and chosen.choice_reason == "requested; runs on CPUExecutionProvider"
    a = [c.scores for c in default.classify(TEXTS)]
    b = [c.scores for c in chosen.classify(TEXTS)]
    assert a == b  # the same graph; on the CPU TF32 does not exist
    report = run_parity(tf32_artifact, only=["onnx-tf32"], widths=(1, 7))  # against the fp32 graph on the CPU
    assert report.exit_code() == 0
    cells = [c.to_json() for c in report.checks]
    budgets = json.loads((ROOT / "abi_specs" / "parity-budgets-1.json").read_text())
    gated = {c["metric"]: c for c in cells if c["provider"] == "CPUExecutionProvider"}
    assert gated and all(c["decision"] == "PASS" for c in gated.values())
    assert gated["max_abs_error"]["requirement"] == f"<= {budgets['tf32']['max_abs_error']['max']:g}"
    cuda = [c for c in cells if c["provider"] == "CUDAExecutionProvider"]
    assert cuda and all(c["decision"] == "NOT_EVALUATED" for c in cuda)
