"""Execution backends: ONNX Runtime on CPU, and its CUDA / TensorRT providers where installed."""
from __future__ import annotations

from pathlib import Path

from readout_sdk.errors import DeviceUnavailable

PRECISION_ORDER = ("fp32", "bf16", "fp16", "int8")  # most precise first
GPU_PROVIDERS = ("TensorrtExecutionProvider", "CUDAExecutionProvider")
MAX_PROFILE_BATCH = 256


def tensorrt_options(record: dict, cache_dir: Path) -> dict:
    """ONNX Runtime TensorRT provider options: one shape profile over [1..256] x [1..max_length] and an
    engine cache, so padded batches of new shapes do not rebuild engines. fp32 (no fp16 flag)."""
    seq = int(record["input"]["max_length"])
    lead = "1x1x" if record["family"] == "multiple_choice" else ""
    names = [i["name"] for i in record["inputs"]]

    def shapes(b: int, s: int) -> str:
        return ",".join(f"{n}:{b}x{lead}{s}" for n in names)

    return {"trt_engine_cache_enable": True, "trt_engine_cache_path": str(cache_dir),
            "trt_profile_min_shapes": shapes(1, 1), "trt_profile_opt_shapes": shapes(32, min(128, seq)),
            "trt_profile_max_shapes": shapes(MAX_PROFILE_BATCH, seq)}


def providers_for(device: str, record: dict | None = None, cache_dir: Path | None = None) -> list:
    """ONNX Runtime providers for ``device`` ("cpu", "cuda" or "auto"), or a clear refusal.

    Where onnxruntime-gpu offers them: TensorRT (configured with a shape profile and an engine cache),
    then CUDA, then the CPU for any node they do not take.
    """
    import onnxruntime as ort

    available = ort.get_available_providers()
    gpu: list = []
    for p in GPU_PROVIDERS:
        if p not in available:
            continue
        if p == "TensorrtExecutionProvider":
            if record is None or cache_dir is None:
                continue
            gpu.append((p, tensorrt_options(record, cache_dir)))
        else:
            gpu.append(p)
    if device == "cpu":
        return ["CPUExecutionProvider"]
    if device == "cuda":
        if not gpu:
            raise DeviceUnavailable(f"device 'cuda' needs onnxruntime-gpu (CUDA or TensorRT execution provider); "
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
