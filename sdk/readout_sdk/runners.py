"""Runners: one compiled graph on one runtime, behind one protocol (:class:`Runner`): ``run(names, feed)
-> arrays``, the record embedded in the graph, and ``close()``.

Every runner is safe to call from several threads at once (the SDK runs ``streams`` batches in
parallel): ONNX Runtime sessions are thread-safe; OpenVINO infer requests are not, so the runner keeps
a pool of them and lends one per call. Everything that can be prepared is prepared at load.
"""
from __future__ import annotations

import os
import queue
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from readout_sdk.errors import Closed, DeviceUnavailable
from readout_sdk.targets.backends import BACKENDS, onnxruntime_module

OPENVINO_EXTRA = BACKENDS["openvino"].install


@runtime_checkable
class Runner(Protocol):
    """What the SDK, the parity harness and the exporter's eager reference all run (after Polygraphy's
    runners): outputs by name for a feed, what ran, the record the graph carries, and a close that
    releases the runtime. A runner is ready when constructed; ``close()`` may be called twice, and any other
    call after it raises `readout_sdk.errors.Closed`."""

    backend: str
    device: str
    providers: tuple[str, ...]
    streams: int
    execution: dict[str, Any]

    def run(self, names: list[str], feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        """The outputs called ``names``, in that order."""
        ...

    def embedded_metadata(self) -> dict[str, str]:
        """The graph's metadata (``readout.abi``: the record it was built against)."""
        ...

    def close(self) -> None:
        """Release sessions, compiled models and device contexts."""
        ...

    def __enter__(self) -> "Runner":
        ...

    def __exit__(self, *exc: Any) -> None:
        """Close the runner."""
        ...


class Lifecycle:
    """The one lifecycle every runner shares (after Polygraphy's runners): ready when constructed, a
    context manager, ``close()`` safe to call twice, and every call after it refused with `Closed` (a
    typed refusal instead of the AttributeError a released session would give). A runner releases its
    runtime in ``_release`` and starts each public call with ``self._open()``."""

    closed: bool = False  # set by close(); a class default, so a runner needs no __init__ call for it

    def close(self) -> None:
        """Release the runtime (``_release``) the first time; later calls do nothing."""
        if self.closed:
            return
        self.closed = True
        self._release()

    def _release(self) -> None:  # pragma: no cover - each runner releases its own runtime
        raise NotImplementedError

    def _open(self) -> None:
        """Refuse a call on a closed runner, naming it."""
        if self.closed:
            raise Closed(f"this {getattr(self, 'backend', 'runner')} runner is closed; open a new one "
                         "(readout_sdk.load, or readout_sdk.targets.open_runner)")

    def __enter__(self):
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def physical_cores() -> int:
    """CPUs this process may use (affinity-aware)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


GPU_PROVIDERS = ("TensorrtExecutionProvider", "CUDAExecutionProvider")
MAX_PROFILE_BATCH = 256


def tensorrt_options(record: dict, cache_dir: Path) -> dict:
    """ONNX Runtime TensorRT provider options: one shape profile over [1..256] x [1..max_length] and an
    engine cache, so padded batches of new shapes do not rebuild engines. fp32 (no fp16 flag)."""
    seq = int(record["input"]["max_length"])
    lead = "1x1x" if "choices" in record["inputs"][0]["axes"] else ""

    def shapes(b: int, s: int) -> str:  # a per-item input (axes [batch]: prompt_rows) has no sequence axis
        return ",".join(f"{i['name']}:{b}" if i["axes"] == ["batch"] else f"{i['name']}:{b}x{lead}{s}"
                        for i in record["inputs"])

    return {"trt_engine_cache_enable": True, "trt_engine_cache_path": str(cache_dir),
            "trt_profile_min_shapes": shapes(1, 1), "trt_profile_opt_shapes": shapes(32, min(128, seq)),
            "trt_profile_max_shapes": shapes(MAX_PROFILE_BATCH, seq)}


def providers_for(device: str, record: dict | None = None, cache_dir: Path | None = None, tf32: bool = False,
                  notes: list[str] | None = None) -> list:
    """ONNX Runtime providers for ``device`` ("cpu", "cuda" or "auto"), or a clear refusal.

    Where onnxruntime-gpu offers them: TensorRT (configured with a shape profile and an engine cache),
    then CUDA, then the CPU for any node they do not take. ``tf32``: whether the target's fp32 MatMuls may
    run as TF32 (its kind says; ONNX Runtime's CUDA default is on, so fp32 sets ``use_tf32`` 0). TensorRT's
    provider is asked for only where TF32 is allowed (TensorRT builds fp32 layers as TF32 by default) and
    only where its library loads: ONNX Runtime lists it whether or not TensorRT is installed, and asking
    for it without TensorRT prints a page of "EP Error" and falls back. Why it was left out goes to ``notes``.
    """
    ort = onnxruntime_module()
    if device == "cpu":  # nothing of a GPU is looked at (or loaded) for a CPU session
        return ["CPUExecutionProvider"]
    if device not in ("cuda", "auto"):
        raise DeviceUnavailable(f"unknown device {device!r}; expected 'cpu', 'cuda' or 'auto'")
    available = ort.get_available_providers()
    no_cuda = cuda_problem()
    if no_cuda:  # asking ONNX Runtime anyway prints its banner and falls back: say why here instead
        if device == "cuda":
            raise DeviceUnavailable(f"device 'cuda' cannot be used: {no_cuda}")
        if notes is not None and "CUDAExecutionProvider" in available:
            notes.append(f"CUDA not used: {no_cuda}")
        return ["CPUExecutionProvider"]
    gpu: list = []
    for p in GPU_PROVIDERS:
        if p not in available:
            continue
        if p == "TensorrtExecutionProvider":
            why = ("the target's fp32 must not run as TF32, which TensorRT's fp32 layers do" if not tf32
                   else "no ABI record to profile it from" if record is None or cache_dir is None
                   else tensorrt_provider_problem())
            if why:
                if notes is not None:
                    notes.append(f"ONNX Runtime's TensorRT provider not used: {why}")
                continue
            gpu.append((p, tensorrt_options(record, cache_dir)))
        else:
            gpu.append((p, {"use_tf32": "1" if tf32 else "0"}))
    return gpu + ["CPUExecutionProvider"]


def _provider_library_problem(provider: str, library: str, what: str) -> str | None:
    """Why ONNX Runtime's ``provider`` library (``tensorrt``, ``cuda``) cannot load here (None: it can). It is
    loaded the way ONNX Runtime would load it (its dependencies resolved by the dynamic loader), so a missing
    ``libnvinfer`` or ``libcublasLt`` is found here, quietly, instead of in ONNX Runtime's "EP Error" banner.
    Asked at each GPU load (a library loaded once costs nothing the next time; one made findable later is
    found then)."""
    import ctypes

    capi = Path(onnxruntime_module().__file__).parent / "capi"
    found = sorted(capi.glob(f"*onnxruntime_providers_{provider}*"))
    if not found:
        return f"{library} is not in this onnxruntime package"
    try:
        for shared in sorted(capi.glob("*onnxruntime_providers_shared*")):  # what the provider links against
            ctypes.CDLL(str(shared), mode=getattr(ctypes, "RTLD_GLOBAL", 0))
        ctypes.CDLL(str(found[0]))
    except OSError as e:
        from readout_sdk.errors import first_line

        return f"{what} cannot be loaded ({first_line(e)})"
    return None


def tensorrt_provider_problem() -> str | None:
    """Why ONNX Runtime's TensorRT provider cannot load here (None: it can)."""
    why = _provider_library_problem("tensorrt", "its library", "TensorRT")
    return f"{why}; install TensorRT to use it" if why and "cannot be loaded" in why else why


def cuda_device_count() -> tuple[int, str]:
    """(CUDA devices the NVIDIA driver shows this process, why none): asked of the driver library itself
    (``cuInit``, ``cuDeviceGetCount``), which every machine that runs CUDA has, so a GPU wheel on a machine
    without a GPU (a CI runner, a laptop) is told apart without creating a session."""
    import ctypes

    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            driver = ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        return 0, "no NVIDIA driver is installed (libcuda not found)"
    status = driver.cuInit(0)
    if status != 0:
        return 0, f"the NVIDIA driver sees no usable GPU (cuInit error {status})"
    count = ctypes.c_int(0)
    if driver.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1:
        return 0, "the NVIDIA driver sees no GPU"
    return count.value, ""


def cuda_problem() -> str | None:
    """Why ONNX Runtime cannot run on CUDA here (None: it can): its CUDA provider is missing (the CPU
    wheel), its library cannot load (CUDA or cuDNN libraries not found), or there is no GPU."""
    ort = onnxruntime_module()
    if "CUDAExecutionProvider" not in ort.get_available_providers():
        return ("this ONNX Runtime has no CUDA provider (the CPU wheel); install the GPU one: "
                "pip install 'readout-export[gpu]'")
    why = _provider_library_problem("cuda", "its CUDA provider's library", "its CUDA provider")
    if why:
        return f"{why}; see docs/gpu.md for the CUDA and cuDNN libraries onnxruntime-gpu needs"
    count, none = cuda_device_count()
    return None if count else none


def gpu_available() -> bool:
    """Whether ONNX Runtime can run on a GPU here (:func:`cuda_problem` finds nothing)."""
    return cuda_problem() is None


class OrtRunner(Lifecycle):
    """ONNX Runtime session, options set deliberately: every graph optimization, intra-op threads over
    the usable CPUs, one inter-op thread, the memory arena on. Intra-op workers spin between operators
    (ONNX Runtime's default) unless ``threads`` is given: waking sleeping workers for each of a graph's
    many small operators cost 13-19 % of throughput and up to 25 % of batch-1 latency (MiniLM, bert-base
    int8 and the NER tagger on 2 cores, 2026-12-03), far more than the 1-3 % of a run the SDK's own work
    between calls takes. ``threads`` says the machine is shared (Ray actors, server instances): there
    workers sleep rather than spin on cores another engine needs."""

    backend = "onnxruntime"

    def __init__(self, path: Path | bytes, providers: list[Any], streams: int = 1, threads: int | None = None):
        """``path``: the graph file, or its bytes as verified (what `open_runner` passes: run what was hashed)."""
        ort = onnxruntime_module()

        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        opts.intra_op_num_threads = max(1, (threads or physical_cores()) // max(1, streams))
        opts.inter_op_num_threads = 1
        opts.enable_cpu_mem_arena = True
        spinning = threads is None
        opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
        self.session = ort.InferenceSession(path if isinstance(path, bytes) else str(path), opts, providers=providers)
        self.providers = tuple(self.session.get_providers())
        self.device = "cpu" if self.providers[0] == "CPUExecutionProvider" else "cuda"
        self.streams = max(1, streams)
        self.execution = {"provider": self.providers[0], "intra_op_threads": opts.intra_op_num_threads,
                          "spinning": spinning}

    def run(self, names: list[str], feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        self._open()
        if self.device == "cuda":
            return self._run_bound(names, feed)
        return self.session.run(names, feed)

    def _run_bound(self, names: list[str], feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        """IO binding on GPU: inputs copied once, outputs left on the device until read back together."""
        binding = self.session.io_binding()
        for name, value in feed.items():
            binding.bind_cpu_input(name, value)
        for name in names:
            binding.bind_output(name, "cuda")
        self.session.run_with_iobinding(binding)
        return binding.copy_outputs_to_cpu()

    def embedded_metadata(self) -> dict[str, str]:
        self._open()
        return dict(self.session.get_modelmeta().custom_metadata_map)

    def output_shapes(self) -> dict[str, tuple[int | None, ...]]:
        """Each graph output's shape as the graph declares it (None: a dynamic axis)."""
        self._open()
        return {o.name: tuple(d if isinstance(d, int) else None for d in o.shape) for o in self.session.get_outputs()}

    def _release(self) -> None:
        self.session = None  # type: ignore[assignment]  # ONNX Runtime frees the session with its last reference


def openvino_core() -> Any:
    """An OpenVINO Core, or a refusal naming the extra."""
    try:
        import openvino as ov
    except ImportError:
        raise DeviceUnavailable(f"backend 'openvino' needs the OpenVINO runtime: {OPENVINO_EXTRA}") from None
    return ov.Core()


def cpu_has_bf16(core: Any | None = None) -> bool:
    """Whether the CPU computes in bf16 natively (avx512-bf16 or AMX), as OpenVINO reports it."""
    core = core or openvino_core()
    return "BF16" in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES")


def hint_runs_here(hint: str, core: Any | None = None) -> bool:
    """Whether OpenVINO can run at inference precision ``hint`` ('f32' or 'bf16') on this CPU: bf16 only
    where the CPU computes it natively (emulated bf16 would be slower than f32 and is not what was proven).
    The one capability check the runner, the budget search and the bench share."""
    return hint != "bf16" or cpu_has_bf16(core)


class OpenVINORunner(Lifecycle):
    """OpenVINO on the CPU, reading the artifact's ONNX graph directly. ``inference_precision`` is 'f32'
    (set explicitly: OpenVINO would otherwise pick bf16 on AMX machines) or 'bf16'. The THROUGHPUT hint
    gives several CPU streams; the runner holds one infer request per stream."""

    backend = "openvino"
    device = "cpu"

    def __init__(self, path: Path, inference_precision: str, streams: int | None = None, threads: int | None = None,
                 graph_sha256: str | None = None, data: bytes | None = None):
        """``graph_sha256`` (the verified sha256 readout.json lists for the file): keep the compiled model
        in this user's cache (`readout_sdk.compiled_cache`), so the next process imports it instead of
        compiling; without it, or with caching off, the graph is compiled every time.``data``: the graph's bytes as verified
        (what `open_runner` passes): OpenVINO reads those, never the file again."""
        core = openvino_core()
        if not hint_runs_here(inference_precision, core):
            raise DeviceUnavailable("precision 'bf16' needs a CPU with avx512-bf16 or AMX; this CPU offers "
                                    f"{', '.join(core.get_property('CPU', 'OPTIMIZATION_CAPABILITIES'))}. "
                                    "Use fp32 or int8")
        config: dict[str, Any] = {"PERFORMANCE_HINT": "THROUGHPUT", "INFERENCE_PRECISION_HINT": inference_precision}
        if streams:
            config["NUM_STREAMS"] = str(streams)
        if threads:
            config["INFERENCE_NUM_THREADS"] = int(threads)
        self.compiled, cache, self._cache = _compile_openvino(core, path, config, graph_sha256, data)
        self.streams = int(self.compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
        self._free: queue.SimpleQueue = queue.SimpleQueue()
        for _ in range(self.streams):
            self._free.put(self.compiled.create_infer_request())
        self._ports = {out.get_any_name(): out for out in self.compiled.outputs}
        self._path = path
        # read now, from the bytes compiled (then let them go: an engine does not hold its graph twice)
        self._embedded = self._read_embedded(data)
        self.providers = ("OpenVINO:CPU",)
        self.execution = {"provider": "OpenVINO:CPU", "inference_precision": inference_precision,
                          "streams": self.streams, "compiled_cache": cache}

    def run(self, names: list[str], feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        self._open()
        request = self._free.get()
        try:
            result = request.infer(feed)  # copies outputs out of the request's buffers
            return [np.asarray(result[self._ports[n]]) for n in names]
        finally:
            self._free.put(request)

    def embedded_metadata(self) -> dict[str, str]:
        self._open()
        return dict(self._embedded)

    def _read_embedded(self, data: bytes | None) -> dict[str, str]:
        """The record the graph embeds. With the compiled-model cache, it is read from the graph once and
        kept beside the blob: the cache directory is keyed by the graph's verified sha256, so the record
        kept there is the one these bytes embed (reading it costs an ONNX Runtime session, ~0.3 s)."""
        import json

        from readout_sdk.abi import METADATA_KEY
        from readout_sdk.artifact import read_onnx_record
        from readout_sdk.atomic import write_atomic

        kept = self._cache / "record.json" if self._cache is not None else None
        if kept is not None:
            try:
                return {METADATA_KEY: json.dumps(json.loads(kept.read_text(encoding="utf-8")))}
            except (OSError, ValueError):
                pass
        record = read_onnx_record(self._path, data)
        if kept is not None:
            try:
                write_atomic(kept, json.dumps(record).encode("utf-8"))
            except OSError:
                pass
        return {METADATA_KEY: json.dumps(record)}

    def output_shapes(self) -> dict[str, tuple[int | None, ...]]:
        """Each output's shape as the compiled model declares it (None: a dynamic axis)."""
        self._open()
        return {name: tuple(d.get_length() if d.is_static else None for d in port.get_partial_shape())
                for name, port in self._ports.items()}

    def _release(self) -> None:
        self._free = queue.SimpleQueue()  # drop the infer requests, then the compiled model
        self.compiled = None


def _compile_openvino(core: Any, path: Path, config: dict[str, Any], graph_sha256: str | None,
                      data: bytes | None = None) -> tuple[Any, str, Path | None]:
    """The compiled model, what the cache did ('hit': imported, 'stored': compiled and written, 'off') and
    the cache directory used. A cache that cannot be written or read (read-only home, a damaged blob) costs only the compile."""
    from readout_sdk.compiled_cache import openvino_cache_dir

    where = openvino_cache_dir(graph_sha256, config) if graph_sha256 else None
    if where is not None:
        try:
            where.mkdir(parents=True, exist_ok=True)
            had = any(where.glob("*.blob"))
            compiled = core.compile_model(_model(core, path, data), "CPU", {**config, "CACHE_DIR": str(where)})
            return compiled, "hit" if had else "stored", where
        except Exception:  # noqa: BLE001  # any cache trouble falls back to a plain compile below
            pass
    return core.compile_model(_model(core, path, data), "CPU", config), "off", None


def _model(core: Any, path: Path, data: bytes | None) -> Any:
    """The graph as OpenVINO reads it: from the verified bytes where given (a file replaced since its hash
    was checked is never read), else from the file."""
    return core.read_model(data) if data is not None else core.read_model(str(path))


TENSORRT_EXTRA = BACKENDS["tensorrt"].install


class TensorRTRunner(Lifecycle):
    """A readout engine file on the TensorRT runtime through Polygraphy's TrtRunner (its own CUDA
    bindings; no torch). One execution context guarded by a lock keeps the SDK's thread-safety promise.
    Refuses an engine built for another TensorRT version or GPU before anything runs, and a request
    outside the engine's optimization profile by name.

    Written against Polygraphy's and TensorRT's documented APIs; no machine of this project has
    TensorRT, so only its refusals were executed here."""

    backend = "tensorrt"
    device = "cuda"
    streams = 1

    def __init__(self, path: Path, record: dict[str, Any], artifact: str = "ARTIFACT", data: bytes | None = None):
        import importlib.util
        import threading

        from readout_sdk.engine_file import check_compatible, read_engine
        from readout_sdk.profiles import Profile

        if importlib.util.find_spec("tensorrt") is None or importlib.util.find_spec("polygraphy") is None:
            raise DeviceUnavailable(f"backend 'tensorrt' needs TensorRT and Polygraphy: {TENSORRT_EXTRA}")
        import tensorrt as trt
        from polygraphy.backend.trt import EngineFromBytes, TrtRunner

        engine_file = read_engine(path, data)  # the verified bytes where given: what was hashed is what runs
        capability, gpu = local_gpu()
        check_compatible(engine_file.header, trt.__version__, capability, artifact)
        if engine_file.header.get("abi") != record:  # also checked by load; parity builds runners directly
            from readout_sdk.artifact import ArtifactError

            raise ArtifactError(f"{Path(path).name}: the record inside the engine differs from readout.json")
        self.profile = Profile.from_json(engine_file.header["profiles"][0])
        self._record = engine_file.header["abi"]
        self._runner = TrtRunner(EngineFromBytes(engine_file.plan))
        self._runner.activate()
        self._lock = threading.Lock()
        self.providers = ("TensorRT",)
        self.execution = {"provider": "TensorRT", "tensorrt": trt.__version__, "gpu": gpu,
                          "profile": self.profile.describe()}

    def run(self, names: list[str], feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        self._open()
        self.profile.check(tuple(feed["input_ids"].shape))
        with self._lock:  # one execution context; TrtRunner reuses its output buffers, so copy them out
            out = self._runner.infer(feed_dict=feed, copy_outputs_to_host=True)
            return [np.array(out[n], copy=True) for n in names]

    def embedded_metadata(self) -> dict[str, str]:
        """The record inside the engine file's header (load compares it with readout.json, as for graphs)."""
        import json

        from readout_sdk.abi import METADATA_KEY

        self._open()
        return {METADATA_KEY: json.dumps(self._record)}

    def _release(self) -> None:
        """Deactivate what __init__ activated (Polygraphy's TrtRunner frees its context and buffers)."""
        with self._lock:
            if self._runner is not None and self._runner.is_active:
                self._runner.deactivate()
            self._runner = None


def local_gpu() -> tuple[str, str]:
    """(compute capability, name) of CUDA device 0 via cuda-python, or a refusal."""
    try:
        try:
            from cuda.bindings import runtime as cudart
        except ImportError:
            from cuda import cudart  # type: ignore[no-redef]
    except ImportError:
        raise DeviceUnavailable(f"backend 'tensorrt' needs cuda-python: {TENSORRT_EXTRA}") from None
    err, props = cudart.cudaGetDeviceProperties(0)
    if int(err) != 0:
        raise DeviceUnavailable(f"no CUDA device (cudaGetDeviceProperties returned {err})")
    name = props.name.decode() if isinstance(props.name, bytes) else str(props.name)
    return f"{props.major}.{props.minor}", name.strip("\x00 ")
