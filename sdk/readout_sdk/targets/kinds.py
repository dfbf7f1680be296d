"""Target kinds: what each kind of compiled graph *is*, declared once.

A target kind is a (format, precision, runtime) triple: the file its graph is stored in, which SDK
backends run it, how the exporter produces it (a recipe name the exporter's `readout_export.targets`
maps to code), which ONNX graph a TensorRT engine is compiled from, which parity budgets gate it, the
arithmetic its MatMuls run in, and what OpenVINO's inference precision must be set to. The SDK, parity,
the bench, the budget search, build and compile read these fields instead of comparing literals, so a
new kind is one entry here (plus an optional exporter recipe, tests and the schema enums).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# most precise first; "auto" is whatever its budget keeps. The one order every ranking reads.
PRECISIONS = ("fp32", "tf32", "bf16", "fp16", "int8", "auto")
FORMATS = ("onnx", "tensorrt")
RUNTIMES = ("onnxruntime", "openvino", "tensorrt", "fused")  # fused: ONNX Runtime's fused transformer operators
FP32_GRAPH = "model.onnx-fp32.onnx"  # the exported graph every other kind starts from


@dataclass(frozen=True)
class TargetKind:
    """One kind of target. ``produce`` names the exporter's recipe (`readout_export.targets`):
    ``export`` (the traced fp32 graph), ``shared`` (runs another kind's graph), ``fp16``, ``dynamic_int8``,
    ``static_int8``, ``budgeted`` (searched and proven at build time) or ``compile`` (an engine compiled
    later on the GPU that runs it)."""

    format: str
    precision: str
    runtime: str
    backends: tuple[str, ...]              # SDK backends that run it, preferred first
    produce: str
    default: bool = True                   # the runtime a manifest gets when it names none
    budget: str | None = None              # parity-budgets-1.json key; None: the target's own recipe budget
    arithmetic: str = "fp32"               # what its MatMuls compute in (bench peaks, docs)
    openvino_inference: str = "f32"        # f32 | bf16 | bf16-where-native: OpenVINO's INFERENCE_PRECISION_HINT
    tensorrt_source: tuple[str, str] | None = None  # tensorrt: (precision, runtime) of the ONNX graph compiled
    manifest_fields: tuple[str, ...] = ()  # manifest keys beyond format/precision/runtime it accepts
    needs: tuple[str, ...] = ()            # modules the exporter needs to produce it
    isas: tuple[str, ...] = ()             # instruction sets its recipe tunes for, the default first
    tf32: bool = True                      # NVIDIA GPUs may run its fp32 MatMuls as TF32 (CUDA's use_tf32,
                                           # TensorRT's default); False: fp32 means fp32 on every device
    description: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.format, self.precision, self.runtime)

    @property
    def name(self) -> str:
        """format-precision, plus the runtime where it is not the default (onnx-int8-openvino)."""
        return f"{self.format}-{self.precision}" + ("" if self.default else f"-{self.runtime}")

    @property
    def file(self) -> str:
        """The graph's file name in the artifact; a ``shared`` kind (bf16, tf32) names the graph it runs."""
        if self.produce == "shared":
            return FP32_GRAPH
        return f"model.{self.name}.{'engine' if self.produce == 'compile' else 'onnx'}"

    @property
    def compiled_on_device(self) -> bool:
        """Produced on the machine that runs it (`readout-export compile`), not by `build`."""
        return self.produce == "compile"

    @property
    def searched(self) -> bool:
        """Chosen by a budget search at build time (its recipe records how; its budget gates it)."""
        return self.produce == "budgeted"

    @property
    def onnx(self) -> bool:
        """An ONNX graph (every ONNX runtime reads it; the build reads its embedded record)."""
        return self.format == "onnx"

    @property
    def triton_platform(self) -> str | None:
        """The Triton platform that serves its graph (None: no Triton backend runs it)."""
        if self.compiled_on_device:
            return "tensorrt_plan"
        return "onnxruntime_onnx" if "onnxruntime" in self.backends else None

    def openvino_precision(self, recipe: dict[str, Any] | None = None, native_bf16: Any = None) -> str:
        """OpenVINO's inference precision for a target of this kind: a searched target's recipe says it;
        ``bf16-where-native`` asks ``native_bf16()`` (the ops int8 leaves out run at bf16 where the CPU has it)."""
        if recipe and recipe.get("inference_precision"):
            return str(recipe["inference_precision"])
        if self.openvino_inference == "bf16-where-native":
            return "bf16" if native_bf16 is not None and native_bf16() else "f32"
        return self.openvino_inference

    def arithmetic_of(self, recipe: dict[str, Any] | None = None) -> str:
        """What a target's MatMuls compute in: a searched target's recipe says (int8 when it chose an int8
        graph, else its inference precision), any other its kind's."""
        if self.searched and recipe:
            return "int8" if recipe.get("int8") else ("bf16" if recipe.get("inference_precision") == "bf16" else "fp32")
        return self.arithmetic


_INT8_FIELDS = ("isa",)
KINDS: dict[str, TargetKind] = {k.name: k for k in (
    TargetKind("onnx", "fp32", "onnxruntime", ("onnxruntime", "openvino"), "export", budget="fp32", tf32=False,
               description="the traced graph, fp32 on every device (TF32 off on CUDA); ONNX Runtime or OpenVINO at f32"),
    TargetKind("onnx", "tf32", "onnxruntime", ("onnxruntime",), "shared", budget="tf32", arithmetic="tf32",
               description="the fp32 graph with its MatMuls allowed to run as TF32 on NVIDIA GPUs (Ampere and newer; "
                           "ONNX Runtime's CUDA default): faster, gated on its own budget; plain fp32 on the CPU"),
    TargetKind("onnx", "bf16", "openvino", ("openvino",), "shared", budget="bf16", arithmetic="bf16",
               openvino_inference="bf16",
               description="the fp32 graph run at OpenVINO's bf16 inference precision (CPUs with avx512-bf16 or AMX)"),
    TargetKind("onnx", "fp16", "onnxruntime", ("onnxruntime",), "fp16", budget="fp16", arithmetic="fp16",
               description="strongly typed fp16 graph; LayerNorm, softmax, reductions and L2 kept fp32"),
    TargetKind("onnx", "fp16", "fused", ("onnxruntime",), "fused", default=False, budget="fp16", arithmetic="fp16",
               description="fp16 with ONNX Runtime's fused transformer operators (Attention, SkipLayerNormalization, "
                           "BiasGelu) for its CUDA provider; readout tail fp32. ONNX Runtime only (TensorRT and "
                           "OpenVINO do not run its contrib operators)"),
    TargetKind("onnx", "int8", "onnxruntime", ("onnxruntime",), "dynamic_int8", budget="int8", arithmetic="int8",
               manifest_fields=_INT8_FIELDS, isas=("avx512-vnni", "avx2", "arm64"),
               description="dynamic int8, per-channel weights, for ONNX Runtime (arm64: Jetson's CPU)"),
    TargetKind("onnx", "int8", "openvino", ("openvino", "onnxruntime"), "static_int8", default=False, budget="int8",
               arithmetic="int8", openvino_inference="bf16-where-native", manifest_fields=_INT8_FIELDS,
               needs=("nncf",), isas=("avx512-vnni", "avx2"), description="static int8 (QDQ) calibrated with NNCF; runs on both runtimes"),
    TargetKind("onnx", "auto", "openvino", ("openvino",), "budgeted", manifest_fields=("budget",), needs=("nncf",),
               description="the fastest graph that keeps a declared budget, searched and proven at build time"),
    TargetKind("tensorrt", "fp32", "tensorrt", ("tensorrt",), "compile", budget="fp32", tf32=False,
               tensorrt_source=("fp32", "onnxruntime"), manifest_fields=("profile",)),
    TargetKind("tensorrt", "bf16", "tensorrt", ("tensorrt",), "compile", budget="bf16", arithmetic="bf16",
               tensorrt_source=("fp32", "onnxruntime"), manifest_fields=("profile",)),
    TargetKind("tensorrt", "fp16", "tensorrt", ("tensorrt",), "compile", budget="fp16", arithmetic="fp16",
               tensorrt_source=("fp16", "onnxruntime"), manifest_fields=("profile",)),
    TargetKind("tensorrt", "int8", "tensorrt", ("tensorrt",), "compile", budget="int8", arithmetic="int8",
               tensorrt_source=("int8", "openvino"), manifest_fields=("profile",)),
)}
BY_KEY: dict[tuple[str, str, str], TargetKind] = {k.key: k for k in KINDS.values()}
MANIFEST_FIELDS = tuple(sorted({f for k in KINDS.values() for f in k.manifest_fields}))


def default_runtime(fmt: str, precision: str) -> str:
    """The runtime a target is prepared for when the manifest does not say (the first runtime listed)."""
    for k in KINDS.values():
        if k.format == fmt and k.precision == precision and k.default:
            return k.runtime
    return RUNTIMES[0]


def kind_of(fmt: str, precision: str, runtime: str | None = None) -> TargetKind | None:
    """The kind of (format, precision, runtime), the precision's default runtime when ``runtime`` is None."""
    return BY_KEY.get((fmt, precision, runtime or default_runtime(fmt, precision)))


def target_name(fmt: str, precision: str, runtime: str | None = None) -> str:
    """format-precision, plus the runtime where it is not the default (onnx-int8-openvino); also for a
    triple no kind declares (so a refusal can name it)."""
    default = default_runtime(fmt, precision)
    return f"{fmt}-{precision}" + ("" if (runtime or default) == default else f"-{runtime}")


def precision_rank(precision: str) -> int:
    """Position in :data:`PRECISIONS` (most precise first); unknown precisions last."""
    return PRECISIONS.index(precision) if precision in PRECISIONS else len(PRECISIONS)


def onnx_source(kind: TargetKind) -> TargetKind | None:
    """The ONNX kind a TensorRT kind is compiled from (None for an ONNX kind)."""
    return BY_KEY[("onnx", *kind.tensorrt_source)] if kind.tensorrt_source else None
