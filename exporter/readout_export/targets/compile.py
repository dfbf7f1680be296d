"""`readout-export compile`: add a TensorRT engine to an existing artifact, on the machine that will run it.

Torch-free: it needs the base install plus the ``tensorrt`` extra (TensorRT, Polygraphy, cuda-python).
The engine is built through Polygraphy from the artifact's ONNX graph for that precision:

* ``tensorrt-fp32``: the fp32 graph.
* ``tensorrt-fp16``: the strongly typed fp16 graph (LayerNorm, softmax, reductions, L2 already fp32 in
  it), parsed as a strongly typed network: the same path on TensorRT 10 (JetPack) and 11 (which
  removed the fp16/bf16/int8 builder flags).
* ``tensorrt-int8``: the QDQ graph of the onnx-int8-openvino recipe (explicit quantization), strongly typed.
* ``tensorrt-bf16``: TensorRT 10 only: the fp32 graph with the bf16 builder flag and the fragile layers
  pinned to fp32 (``precision_constraints="obey"``); TensorRT 11 needs a bf16 graph this release does not
  build, and says so.

The engine file is written atomically, then ``readout.json`` is replaced atomically to list it; an
engine that is not listed is never loaded. NOTE: no machine of this project has TensorRT; this module
is written against Polygraphy's and TensorRT's documented APIs and executed only up to the refusals.
"""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any, Callable

from readout_sdk.artifact import ARTIFACT_FILE, open_artifact, sha256_file, write_meta
from readout_sdk.targets import KINDS, Target, TargetKind, onnx_source
from readout_sdk.engine_file import write_engine
from readout_sdk.profiles import Profile, derive_profile

from readout_export.errors import ReadoutExportError

COMPILED = {k.name: k for k in KINDS.values() if k.compiled_on_device}  # what `compile` builds (the registry's)
TRT_EXTRA = ("pip install 'readout-export[tensorrt]' on the machine that will run the engine (on Jetson, "
             "TensorRT comes with JetPack; see docs/jetson.md)")


class CompileError(ReadoutExportError):
    """The target, the artifact or this machine cannot produce the engine: exit 2, nothing changed."""

    exit_code = 2


def parse_target(name: str) -> TargetKind:
    """'tensorrt-fp16' -> its kind, or a refusal listing the targets compile knows."""
    if name not in COMPILED:
        raise CompileError(f"--target {name}: expected one of {', '.join(COMPILED)}")
    return COMPILED[name]


def source_graph(artifact: Path, kind: TargetKind) -> Path:
    """The artifact's ONNX graph a device-compiled kind is compiled from."""
    art = open_artifact(artifact)
    want = onnx_source(kind)
    for t in art.targets:
        if t.kind == want:
            return art.path / t.file
    raise CompileError(f"{artifact}: has no {want.name} graph to compile {kind.name} from; add "
                       f'{{"format": "{kind.format}", "precision": "{kind.precision}"}} to the manifest\'s targets '
                       "and rebuild")


def _is(entry: dict[str, Any], kind: TargetKind) -> bool:
    """Whether a readout.json target entry is of ``kind``."""
    return (entry["format"], entry["precision"], entry.get("runtime")) == kind.key


def _require_tensorrt() -> Any:
    missing = [m for m in ("tensorrt", "polygraphy") if importlib.util.find_spec(m) is None]
    if missing:
        raise CompileError(f"TensorRT is not installed ({', '.join(missing)} missing): {TRT_EXTRA}")
    import tensorrt

    return tensorrt


def local_gpu() -> tuple[str, str]:
    """(compute capability 'major.minor', GPU name) of CUDA device 0, or a refusal."""
    from readout_sdk.errors import DeviceUnavailable
    from readout_sdk.runners import local_gpu as cuda_device

    try:
        return cuda_device()
    except DeviceUnavailable as e:
        raise CompileError(str(e)) from None


def _fragile_fp32(trt: Any) -> Callable[..., None]:
    """Pin normalization, softmax, reductions and exp/sqrt/div layers to fp32 (bf16 builds on TensorRT 10)."""
    kinds = {trt.LayerType.NORMALIZATION, trt.LayerType.SOFTMAX, trt.LayerType.REDUCE, trt.LayerType.UNARY}

    def apply(network: Any) -> None:
        for layer in network:
            if layer.type in kinds:
                layer.precision = trt.float32
                for k in range(layer.num_outputs):
                    layer.set_output_type(k, trt.float32)

    return apply


def build_plan(onnx_path: Path, precision: str, profile: Profile, inputs: list[dict[str, Any]]) -> bytes:
    """Serialize a TensorRT plan through Polygraphy, handling TensorRT 10 and 11 explicitly."""
    trt = _require_tensorrt()
    from polygraphy.backend.trt import (CreateConfig, EngineBytesFromNetwork, NetworkFromOnnxPath,
                                        PostprocessNetwork)
    from polygraphy.backend.trt import Profile as TrtProfile

    major = int(trt.__version__.split(".")[0])
    if precision == "bf16" and major >= 11:
        raise CompileError(f"TensorRT {trt.__version__} takes precision only from a strongly typed graph, and this "
                           "release builds no bf16 graph: compile tensorrt-fp16, or use TensorRT 10")
    lo, opt, hi = profile.input_shapes()
    trt_profile = TrtProfile()
    for spec in inputs:  # the record's inputs; a per-item one (axes [batch]: prompt_rows) has the batch axis only
        per_item = spec["axes"] == ["batch"]
        trt_profile.add(spec["name"], min=lo[:1] if per_item else lo, opt=opt[:1] if per_item else opt,
                        max=hi[:1] if per_item else hi)
    strongly_typed = precision in ("fp16", "int8")
    network: Any = NetworkFromOnnxPath(str(onnx_path), strongly_typed=strongly_typed)
    config: dict[str, Any] = {"profiles": [trt_profile]}
    if precision == "bf16":
        network = PostprocessNetwork(network, _fragile_fp32(trt), "fragile layers in fp32")
        config.update(bf16=True, precision_constraints="obey")
    return EngineBytesFromNetwork(network, config=CreateConfig(**config))()


def compile_engine(artifact: str | Path, target: str, say: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Compile ``target`` into the artifact; return its new readout.json target entry. The artifact is
    locked meanwhile (`readout_sdk.staging`): a second compile or a kept-report update waits or is refused."""
    from readout_sdk.staging import exclusive

    root = Path(artifact)
    with exclusive(root / ARTIFACT_FILE, what="compiled into"):
        return _compile(root, target, say)


def _compile(root: Path, target: str, say: Callable[[str], None]) -> dict[str, Any]:
    kind = parse_target(target)
    precision = kind.precision
    source = source_graph(root, kind)
    trt = _require_tensorrt()
    capability, gpu = local_gpu()
    meta = json.loads((root / ARTIFACT_FILE).read_text(encoding="utf-8"))
    record = meta["abi"]
    pending = {p["target"]: p for p in meta.get("compile", [])}
    earlier = next((t for t in meta["targets"] if _is(t, kind)), {})
    stated = pending.get(target, {}).get("profile") or earlier.get("profile")  # a recompile keeps the profile
    profile = Profile.from_json(stated) if stated else derive_profile(None, int(record["input"]["max_length"]),
                                                                      record["family"])
    say(f"building {target} from {source.name} with TensorRT {trt.__version__} on {gpu} (sm {capability}); "
        f"profile {profile.describe()}")
    plan = build_plan(source, precision, profile, record["inputs"])
    name = kind.file
    header = {"abi": record, "target": target, "tensorrt": trt.__version__, "gpu": gpu,
              "compute_capability": capability, "profiles": [profile.to_json()], "source": source.name}
    write_engine(root / name, header, bytes(plan))
    entry = Target(kind.format, kind.precision, name, sha256_file(root / name), kind.runtime, profile=profile.to_json(),
                   tensorrt=trt.__version__, compute_capability=capability, gpu=gpu).listing()
    meta["targets"] = [t for t in meta["targets"] if not _is(t, kind)]
    meta["targets"].append(entry)
    meta["compile"] = [p for p in meta.get("compile", []) if p["target"] != target]
    if not meta["compile"]:
        del meta["compile"]
    write_meta(root, meta)
    say(f"listed {name} in {ARTIFACT_FILE} (raw plan beside it: {Path(name).with_suffix('.plan').name})")
    return entry
