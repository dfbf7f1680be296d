"""Execution backends: ONNX Runtime on CPU, and its CUDA / TensorRT providers where installed."""
from __future__ import annotations

from pathlib import Path

from readout_sdk.errors import DeviceUnavailable

PRECISION_ORDER = ("fp32", "bf16", "fp16", "int8")  # most precise first
# ONNX Runtime's TensorRT provider rebuilds engines for every new padded shape unless profiles and an
# engine cache are configured; native TensorRT engines arrive with the TensorRT issue. CUDA for now.
GPU_PROVIDERS = ("CUDAExecutionProvider",)


def providers_for(device: str) -> list[str]:
    """ONNX Runtime providers for ``device`` ("cpu", "cuda" or "auto"), or a clear refusal."""
    import onnxruntime as ort

    available = ort.get_available_providers()
    gpu = [p for p in GPU_PROVIDERS if p in available]
    if device == "cpu":
        return ["CPUExecutionProvider"]
    if device == "cuda":
        if not gpu:
            raise DeviceUnavailable(f"device 'cuda' needs onnxruntime-gpu (CUDAExecutionProvider); "
                                    f"this machine offers: {', '.join(available)}")
        return gpu + ["CPUExecutionProvider"]
    if device == "auto":
        return gpu + ["CPUExecutionProvider"]
    raise DeviceUnavailable(f"unknown device {device!r}; expected 'cpu', 'cuda' or 'auto'")


def pick_target(targets, precision: str | None, device: str):
    """The requested precision's ONNX target, or the most precise one; refusals list what exists."""
    onnx_targets = [t for t in targets if t.format == "onnx"]
    have = ", ".join(f"{t.format}-{t.precision}" for t in targets)
    if precision is not None:
        for t in onnx_targets:
            if t.precision == precision:
                return t
        raise DeviceUnavailable(f"precision {precision!r} is not in this artifact (it has: {have})")
    for p in PRECISION_ORDER:
        for t in onnx_targets:
            if t.precision == p:
                return t
    raise DeviceUnavailable(f"no target of this artifact runs on {device} with onnxruntime (it has: {have})")


def make_session(path: Path, providers: list[str]):
    """An inference session; ONNX Runtime sessions may be run from several threads at once."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), opts, providers=providers)
