"""Choosing what runs: target x backend (ONNX Runtime on CPU/CUDA/TensorRT providers, OpenVINO on CPU)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from readout_sdk.errors import DeviceUnavailable

PRECISION_ORDER = ("fp32", "bf16", "fp16", "int8", "auto")  # most precise first (auto: whatever its budget keeps)
GPU_PROVIDERS = ("TensorrtExecutionProvider", "CUDAExecutionProvider")
MAX_PROFILE_BATCH = 256


def tensorrt_options(record: dict, cache_dir: Path) -> dict:
    """ONNX Runtime TensorRT provider options: one shape profile over [1..256] x [1..max_length] and an
    engine cache, so padded batches of new shapes do not rebuild engines. fp32 (no fp16 flag)."""
    seq = int(record["input"]["max_length"])
    lead = "1x1x" if "choices" in record["inputs"][0]["axes"] else ""
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


BACKENDS = ("onnxruntime", "openvino", "tensorrt")


def installed(backend: str) -> bool:
    """Whether a backend's runtime can be imported here (without importing it); TensorRT also needs
    Polygraphy and cuda-python."""
    import importlib.util

    modules = ("tensorrt", "polygraphy", "cuda") if backend == "tensorrt" else (backend,)
    return all(importlib.util.find_spec(m) is not None for m in modules)


def gpu_available() -> bool:
    """Whether ONNX Runtime offers a GPU provider here."""
    import onnxruntime as ort

    return any(p in ort.get_available_providers() for p in GPU_PROVIDERS)


def machine_id() -> str:
    """What makes CPU measurements comparable: architecture, CPU model and the instruction sets that
    change kernels (bench and parity results kept in an artifact are used only on the same kind of CPU)."""
    import platform

    model, flags = platform.processor() or "", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name") and not model.strip():
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                elif line.startswith(("flags", "Features")):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    isa = sorted(flags & {"avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8", "asimddp"})
    return f"{platform.machine()} | {model} | {' '.join(isa)}"


@dataclass(frozen=True)
class Selection:
    """The target and backend a load picked, and why."""

    target: Any
    backend: str
    reason: str


@dataclass(frozen=True)
class Evidence:
    """What an artifact keeps about its targets on this kind of machine, for this release: the worst value
    of each parity metric per (target, backend) whose every parity check passed, and bench items/s."""

    parity: dict[tuple[str, str], dict[str, float]]
    speed: dict[tuple[str, str], float]


def meets(worst: dict[str, float], floor: dict[str, float]) -> bool:
    """Whether measured worst values meet a floor (names ending in 'error' are maxima, the rest minima)."""
    for metric, bound in floor.items():
        value = worst.get(metric)
        if value is None or (value > bound if metric.endswith("error") else value < bound):
            return False
    return True


def _floor_text(floor: dict[str, float]) -> str:
    return ", ".join(f"{m} {'<=' if m.endswith('error') else '>='} {v:g}" for m, v in floor.items())


def _candidates(targets, precision: str | None, backend: str, device: str,
                name: str | None = None) -> list[tuple[Any, str]]:
    pairs = []
    for t in targets:
        if name is not None and t.name != name:
            continue
        if precision is not None and t.precision != precision:
            continue
        for b in t.backends:
            if backend != "auto" and b != backend:
                continue
            if device == "cuda" and b == "openvino":
                continue
            if b == "tensorrt" and (device == "cpu" or (device != "cuda" and backend != "tensorrt" and name is None)):
                continue  # engines run on the GPU: only when asked for, never on device "cpu"
            pairs.append((t, b))
    return pairs


def _default_rank(pair: tuple[Any, str]) -> tuple[int, int, int, int]:
    t, b = pair
    return (0 if b == "tensorrt" else 1,  # on a GPU, a compiled engine first
            PRECISION_ORDER.index(t.precision) if t.precision in PRECISION_ORDER else 99,
            0 if t.runtime == "onnxruntime" else 1, t.backends.index(b))


def choose(targets, precision: str | None, device: str, backend: str = "auto",
           floor: dict[str, float] | None = None, evidence: Evidence | None = None,
           target: str | None = None) -> Selection:
    """Pick (target, backend). Explicit choices are honoured or refused with what exists. Otherwise the
    most precise target, unless the artifact declares a serving ``floor`` (``serving.min_parity``): then the
    fastest pair whose kept parity on this kind of machine meets it (``evidence``), the most precise pair
    where none is measured. A bench alone never changes the pick: only a declared floor lets it."""
    if backend not in BACKENDS + ("auto",):
        raise DeviceUnavailable(f"unknown backend {backend!r}; expected 'onnxruntime', 'openvino', 'tensorrt' or 'auto'")
    if device == "cuda" and backend == "openvino":
        raise DeviceUnavailable("backend 'openvino' runs on the CPU in this release; use device='cpu'")
    have = ", ".join(f"{t.name} ({'/'.join(t.backends) or 'no SDK backend'})" for t in targets)
    pairs = _candidates(targets, precision, backend, device, target)
    if not pairs:
        exists = [t for t in targets if (target is None or t.name == target)
                  and (precision is None or t.precision == precision)]
        if not exists:
            what = f"target {target!r}" if target else f"precision {precision!r}"
            raise DeviceUnavailable(f"{what} is not in this artifact (it has: {have})")
        where = f"backend {backend!r} on device {device!r}" if backend != "auto" else f"device {device!r}"
        what = (f"{target or f'precision {precision!r}'} cannot run" if target or precision
                else "none of this artifact's targets can run")
        raise DeviceUnavailable(f"{what} on {where} (it has: {have}); bf16 runs on OpenVINO, "
                                "OpenVINO on the CPU, TensorRT engines on CUDA")
    runnable = [p for p in pairs if installed(p[1])]
    if not runnable:
        raise DeviceUnavailable(f"{pairs[0][0].name} runs on {pairs[0][1]}, which is not installed: "
                                f"pip install 'readout-export[{pairs[0][1]}]'")
    explicit = precision is not None or target is not None or backend != "auto"
    best = min(runnable, key=_default_rank)
    if explicit:
        return Selection(best[0], best[1], "requested")
    if not floor:
        return Selection(best[0], best[1], "most precise target (the artifact declares no serving.min_parity floor)")
    ev = evidence or Evidence({}, {})  # kept reports are CPU measurements: the loader passes none on a GPU
    eligible = [p for p in runnable if meets(ev.parity.get((p[0].name, p[1]), {}), floor)]
    measured = [p for p in eligible if (p[0].name, p[1]) in ev.speed]
    if measured:
        pick = max(measured, key=lambda p: ev.speed[(p[0].name, p[1])])
        key = (pick[0].name, pick[1])
        worst = ev.parity.get(key, {})
        shown = ", ".join(f"{m} {worst[m]:.6g}" for m in floor if m in worst) or "the most precise target"
        return Selection(pick[0], pick[1], f"fastest target whose kept parity meets serving.min_parity "
                                           f"({_floor_text(floor)}): {pick[0].name} on {pick[1]}, {shown} in "
                                           f"parity.json, {ev.speed[key]:.0f} items/s in bench.json")
    return Selection(best[0], best[1], f"most precise target: no kept bench on this kind of machine ranks targets whose "
                                       f"parity meets serving.min_parity ({_floor_text(floor)})")


PROVIDER_BACKEND = {"CPUExecutionProvider": "onnxruntime", "OpenVINO:CPU": "openvino"}


def kept_evidence(root: Path, release_id: str | None, files: dict[str, str], listing: Mapping[str, Any]) -> Evidence:
    """The artifact's kept parity and bench reports as :class:`Evidence`: this release's parity
    (`readout_sdk.evidence.kept_parity`) measured on this kind of machine, per (target, backend) whose every
    check passed, with bench speeds from this kind of machine; empty when there are none."""
    from readout_sdk.evidence import kept_parity, read_kept

    here = machine_id()
    kept, _ = kept_parity(root, release_id, files, listing)
    if kept is None or kept.machine != here:
        return Evidence({}, {})
    passed = {(target, PROVIDER_BACKEND[provider]): cell.measured for (target, provider), cell in kept.cells.items()
              if provider in PROVIDER_BACKEND and cell.decisions == {"PASS"}}
    speed: dict[tuple[str, str], float] = {}
    bench = read_kept(root, "bench", listing) or {}
    if bench.get("machine") == here and isinstance(bench.get("rows"), list):
        for row in bench["rows"]:
            key = (row.get("target"), row.get("backend")) if isinstance(row, dict) else None
            if key in passed and isinstance(row.get("items_per_s"), (int, float)) and row["items_per_s"] > 0:
                speed[key] = max(speed.get(key, 0.0), float(row["items_per_s"]))
    return Evidence(passed, speed)
