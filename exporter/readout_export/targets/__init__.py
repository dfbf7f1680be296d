"""The exporter's half of the target registry: how each kind of target is produced.

`readout_sdk.targets.KINDS` says what a kind is; a kind's ``produce`` names one recipe here. `build`
exports the fp32 graph, then asks each target's recipe for its graph; the recipe's modules (fp16
conversion, int8 quantization, the budget search and its proof, TensorRT compilation) live beside this
file. A new way of producing a graph is one function in :data:`RECIPES` and one module.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from readout_sdk.families import Family
from readout_sdk.targets import FP32_GRAPH, Target

Step = Callable[[str], None]


@dataclass
class Production:
    """What a recipe works from: the staging directory holding the checked fp32 graph, the ABI record
    and the progress reporter. Calibration feeds are built once, when a recipe first asks."""

    staging: Path
    record: dict[str, Any]
    step: Step
    attention: tuple[int, int] | None = None  # (heads, hidden size) from the model's config: what fusing needs
    family: Family | None = None  # the build's family (`Plan.spec`; None: a multi-output build, nothing calibrated)
    _calibration: list[dict[str, Any]] | None = field(default=None, repr=False)

    @property
    def fp32(self) -> Path:
        return self.staging / FP32_GRAPH

    def calibration(self) -> list[dict[str, Any]]:
        """The calibration feeds (:func:`calibration_feeds`), built once."""
        if self._calibration is None:
            self._calibration = calibration_feeds(self.record, self.staging, self.family)
        return self._calibration


def calibration_feeds(record: dict[str, Any], root: Path, family: Family | None = None) -> list[dict[str, Any]]:
    """Batch-1 feeds of a fixed mixed-length corpus, tokenized exactly as the SDK will (the tokenizer
    file in ``root``): what int8 recipes calibrate on. ``family``: the record's, where the caller has it
    resolved (a build's `Plan.spec`); else the one the record names (`readout_sdk.families.of_record`)."""
    from readout_parity.corpus import mixed_corpus
    from readout_sdk.batching import feed_for
    from readout_sdk.families import Context, of_record

    from readout_export.targets.quantize import CALIBRATION_ITEMS, CALIBRATION_SEED

    ctx = Context(record, root / "tokenizer.json")
    spec = family if family is not None else of_record(record)
    items = [spec.check_item(i, x) for i, x in enumerate(mixed_corpus(spec, CALIBRATION_ITEMS, CALIBRATION_SEED))]
    return [feed_for(record, [part]) for parts in spec.encode(ctx, 0, items) for part in parts]


def _shared(p: Production, t: Target) -> None:
    """Runs the fp32 graph (bf16: at OpenVINO's bf16 inference precision; tf32: with TF32 allowed on CUDA):
    nothing to write."""


def _fp16(p: Production, t: Target) -> None:
    from readout_export.targets.fp16 import make_fp16_graph

    p.step(f"converting {t.file} (fp16; LayerNorm, softmax, reductions and L2 kept fp32)")
    kept = make_fp16_graph(p.fp32, p.staging / t.file)
    p.step(f"  {kept} nodes kept in fp32")


def _dynamic_int8(p: Production, t: Target) -> None:
    from readout_export.targets.quantize import quantize_dynamic_int8

    p.step(f"quantizing {t.file} (dynamic int8, per-channel weights, {t.isa}; the parity harness gates it)")
    quantize_dynamic_int8(p.fp32, p.staging / t.file, t.isa or t.kind.isas[0])


def _static_int8(p: Production, t: Target) -> None:
    from readout_export.targets.quantize import CALIBRATION_ITEMS, quantize_static_openvino

    p.step(f"quantizing {t.file} (static int8 with NNCF, calibrated on {CALIBRATION_ITEMS} built-in texts)")
    kept = quantize_static_openvino(p.fp32, p.staging / t.file, p.calibration())
    p.step(f"  {kept} narrowing MatMul/Gemm nodes kept in higher precision")


# produce name (TargetKind.produce) -> the recipe writing the target's graph into the staging directory.
# "export" is the traced graph every recipe starts from; "budgeted" runs once the staged artifact can be
# opened (`readout_export.targets.budgeted`); "compile" runs later, on the GPU (`readout_export.targets.compile`).
def _fused(p: Production, t: Target) -> None:
    from readout_export.errors import ManifestError
    from readout_export.targets.fused import FusionIncomplete, describe, make_fused_graph

    if p.attention is None:
        raise ManifestError("$.targets", f"{t.name}: this model's config names no attention heads and hidden size, "
                                         "which ONNX Runtime's attention fusion needs; use onnx-fp16")
    p.step(f"fusing {t.file} (ONNX Runtime's Attention, SkipLayerNormalization, BiasGelu; fp16, readout tail fp32)")
    try:
        counts = make_fused_graph(p.fp32, p.staging / t.file, *p.attention)
    except FusionIncomplete as e:
        raise ManifestError("$.targets", f"{t.name}: {e}") from None
    p.step(f"  fused: {describe(counts)}")


RECIPES: dict[str, Callable[[Production, Target], None]] = {
    "export": _shared, "shared": _shared, "fp16": _fp16, "dynamic_int8": _dynamic_int8, "static_int8": _static_int8,
    "fused": _fused,
}


def produce(p: Production, t: Target) -> Target:
    """Write ``t``'s graph with its kind's recipe and return it as readout.json lists it (file, sha256)."""
    from readout_sdk.artifact import sha256_file

    RECIPES[t.kind.produce](p, t)
    return Target(t.format, t.precision, t.file, sha256_file(p.staging / t.file), t.runtime, isa=t.isa)
