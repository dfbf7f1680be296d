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
    from readout_sdk.artifact import read_verified  # not at import: artifact imports the target registry

    path = Path(root) / target.file
    kind = target.kind
    if backend not in kind.backends:
        raise DeviceUnavailable(f"{target.name} does not run on {backend} (it runs on {', '.join(kind.backends)})")
    if not BACKENDS[backend].runs_on(device) and device != "auto":
        raise DeviceUnavailable(f"backend {backend!r} runs on {' or '.join(BACKENDS[backend].devices)}, "
                                f"not on device {device!r}")
    # a listed graph is read once and hashed, and the runtime gets those bytes: what was checked is what runs
    data = read_verified(Path(root), target.file, target.sha256) if target.sha256 else None
    if backend == "openvino":
        precision = kind.openvino_precision(target.recipe, runners.cpu_has_bf16)
        return _checked(runners.OpenVINORunner(path, precision, streams, threads, graph_sha256=target.sha256 or None,
                                               data=data), target, record)
    if backend == "tensorrt":
        return runners.TensorRTRunner(path, record or {}, str(root), data)
    from readout_sdk.compiled_cache import tensorrt_cache_dir

    notes: list[str] = []
    providers = runners.providers_for(device, record, tensorrt_cache_dir(target.sha256) if target.sha256 else None,
                                      tf32=kind.tf32, notes=notes)
    runner = _checked(runners.OrtRunner(data if data is not None else path, providers, streams or 1, threads),
                      target, record)
    if runner.device == "cuda":  # what the CUDA provider was told: fp32 means fp32 unless the kind allows TF32
        notes.insert(0, f"TF32 {'allowed' if kind.tf32 else 'off'} for {target.name}")
    runner.execution["notes"] = notes
    if device == "cuda" and runner.device == "cpu":
        runner.close()
        raise DeviceUnavailable("ONNX Runtime could not start CUDA for this graph and fell back to the CPU; "
                                "check the CUDA / cuDNN libraries that onnxruntime-gpu needs")
    return runner


def _checked(runner: Any, target: Target, record: dict[str, Any] | None) -> Any:
    """``runner`` once its graph's outputs are the ones ``record`` states (name and every fixed axis, the
    head's width included), else closed and refused: a record whose label map, vector width or vocabulary
    disagrees with the graph it ships with never runs (4 labels over a 3-wide head would index past it)."""
    if record is None:
        return runner
    try:
        problem = output_mismatch(record, runner.output_shapes())
    except BaseException:
        runner.close()
        raise
    if problem:
        from readout_sdk.artifact import ArtifactError

        runner.close()
        raise ArtifactError(f"{target.file}: {problem}")
    return runner


def output_mismatch(record: dict[str, Any], shapes: dict[str, tuple[int | None, ...]]) -> str | None:
    """Why the graph outputs ``shapes`` (name -> declared shape, None for a dynamic axis) are not the ones
    ``record`` states, or None when they are: every stated output exists with as many axes, and each axis
    the record fixes has that size in the graph (an axis the graph leaves dynamic is not a disagreement)."""
    for i, out in enumerate(record.get("outputs") or ()):
        name, stated = out["name"], out.get("shape") or []
        if name not in shapes:
            return f"the record's output {name!r} ($.outputs[{i}]) is not an output of the graph"
        have = shapes[name]
        if len(have) != len(stated):
            return (f"output {name!r} has {len(have)} axes in the graph, the record ($.outputs[{i}].shape) "
                    f"states {len(stated)}")
        for axis, (want, got) in enumerate(zip(stated, have)):
            if want is not None and got is not None and want != got:
                return (f"output {name!r} is {got} wide on axis {axis} in the graph, the record "
                        f"($.outputs[{i}].shape[{axis}]) states {want}")
    return None


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
