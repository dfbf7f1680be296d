"""The one runner factory: every path that runs a target's graph (load, parity, the bench, the budget
search, serving) opens its runner here, so what parity proved is what `load` runs."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from readout_sdk.errors import DeviceUnavailable
from readout_sdk.targets.backends import BACKENDS
from readout_sdk.targets.target import Target


def open_runner(root: str | Path, target: Target, backend: str, device: str = "cpu", *,
                record: dict[str, Any] | None = None, streams: int | None = None, threads: int | None = None) -> Any:
    """A ready runner (`readout_sdk.runners.Runner`, a context manager) for ``target``'s graph under
    ``root`` on ``backend`` and ``device`` ("cpu", "cuda" or "auto"). ``record``: the artifact's ABI record
    (TensorRT engines are checked against it; ONNX Runtime's TensorRT provider is profiled from it).
    A graph whose sha256 is known is compiled once per user (OpenVINO's compiled-model cache)."""
    from readout_sdk import runners

    path = Path(root) / target.file
    kind = target.kind
    if backend not in kind.backends:
        raise DeviceUnavailable(f"{target.name} does not run on {backend} (it runs on {', '.join(kind.backends)})")
    if not BACKENDS[backend].runs_on(device) and device != "auto":
        raise DeviceUnavailable(f"backend {backend!r} runs on {' or '.join(BACKENDS[backend].devices)}, "
                                f"not on device {device!r}")
    if backend == "openvino":
        precision = kind.openvino_precision(target.recipe, runners.cpu_has_bf16)
        return runners.OpenVINORunner(path, precision, streams, threads, graph_sha256=target.sha256 or None)
    if backend == "tensorrt":
        return runners.TensorRTRunner(path, record or {}, str(root))
    from readout_sdk.compiled_cache import tensorrt_cache_dir

    notes: list[str] = []
    providers = runners.providers_for(device, record, tensorrt_cache_dir(target.sha256) if target.sha256 else None,
                                      tf32=kind.tf32, notes=notes)
    runner = runners.OrtRunner(path, providers, streams or 1, threads)
    if runner.device == "cuda":  # what the CUDA provider was told: fp32 means fp32 unless the kind allows TF32
        notes.insert(0, f"TF32 {'allowed' if kind.tf32 else 'off'} for {target.name}")
    runner.execution["notes"] = notes
    if device == "cuda" and runner.device == "cpu":
        runner.close()
        raise DeviceUnavailable("ONNX Runtime could not start CUDA for this graph and fell back to the CPU; "
                                "check the CUDA / cuDNN libraries that onnxruntime-gpu needs")
    return runner


Factory = Callable[[], Any]


def ways_to_run(root: str | Path, target: Target, record: dict[str, Any] | None = None
                ) -> list[tuple[str, Factory | str]]:
    """Every way the SDK can run ``target`` (its backends on each device they run on), as (provider
    label, a runner factory, or the reason it cannot run here): the cells of parity's grid. Each factory
    opens the runner `load` would open for that backend and device."""
    out: list[tuple[str, Factory | str]] = []
    for name in target.kind.backends:
        for device in BACKENDS[name].devices:
            why = _cannot(name, device, target)
            out.append((BACKENDS[name].label(device),
                        why or (lambda b=name, d=device: open_runner(root, target, b, d, record=record))))
    return out


def _cannot(backend: str, device: str, target: Target) -> str | None:
    """Why ``target`` cannot run on ``backend`` on ``device`` here (None: it can)."""
    from readout_sdk import runners

    spec = BACKENDS[backend]
    if not spec.installed():
        return f"{spec.label(device)} is not installed on this machine ({spec.install})"
    if device == "cuda" and not spec.compiled and (problem := runners.cuda_problem()):
        return problem
    if device == "cuda" and spec.compiled and not (runners.gpu_available() or _importable("cuda")):
        return "no CUDA device"
    if backend == "openvino" and not runners.hint_runs_here(
            target.kind.openvino_precision(target.recipe, runners.cpu_has_bf16)):
        return "this CPU has no native bf16 (avx512-bf16 or AMX)"
    return None


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None
