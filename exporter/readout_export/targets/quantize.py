"""int8 recipes, one per runtime, chosen for parity as well as speed.

* ``onnxruntime`` (dynamic): ONNX Runtime's quantization tools, per-channel int8 weights on MatMul/Gemm,
  activations quantized per batch at run time, so LayerNorm, softmax, pooling and L2 stay fp32. ``isa``
  avx2 (no VNNI) keeps weights to 7 bits so u8*s8 pair sums cannot saturate (vpmaddubsw); avx512-vnni and
  arm64 use full 8-bit weights.
* ``openvino`` (static, QDQ): NNCF's transformer model type with symmetric quantization (the PERFORMANCE
  preset: every zero point is 0, which TensorRT's explicit quantization requires, so the same graph is
  the source of tensorrt-int8; on MiniLM it measured min cosine 0.99745 against 0.99750 for the
  asymmetric MIXED preset), calibrated on a fixed mixed-length corpus; the FFN
  down-projections (and any head whose weight narrows the width) stay in higher precision because their
  inputs, after GELU, carry the outliers that cost int8 most of its error on BERT-style encoders
  (measured on all-MiniLM-L6-v2: min cosine 0.986 with them quantized, 0.992 without).
"""
from __future__ import annotations

import contextlib
import io
import logging
from pathlib import Path
from typing import Any, Iterable

CALIBRATION_ITEMS = 128
CALIBRATION_SEED = 20261130  # the benchmark corpus uses another seed


def narrowing_matmuls(model: Any) -> list[str]:
    """Names of MatMul/Gemm nodes whose constant weight maps a wider input to a narrower output."""
    shapes = {i.name: tuple(i.dims) for i in model.graph.initializer}
    names = []
    for node in model.graph.node:
        if node.op_type not in ("MatMul", "Gemm"):
            continue
        weights = [shapes[x] for x in node.input[:2] if x in shapes and len(shapes[x]) == 2]
        if not weights:
            continue
        rows, cols = weights[0]
        transposed = node.op_type == "Gemm" and any(a.name == "transB" and a.i == 1 for a in node.attribute)
        fan_in, fan_out = (cols, rows) if transposed else (rows, cols)
        if fan_in > fan_out:
            names.append(node.name)
    return names


def quantize_dynamic_int8(fp32: Path, out: Path, isa: str) -> None:
    """The onnxruntime recipe (see the module docstring). The ABI record is kept."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.getLogger().setLevel(logging.ERROR)  # the tool logs a pre-processing hint at WARNING
    quantize_dynamic(str(fp32), str(out), per_channel=True, weight_type=QuantType.QInt8,
                     op_types_to_quantize=["MatMul", "Gemm"], reduce_range=(isa == "avx2"))


def quantize_static_openvino(fp32: Path, out: Path, feeds: Iterable[dict[str, Any]], keep_narrowing: bool = True) -> int:
    """The openvino recipe (see the module docstring); returns how many nodes stayed in higher precision.
    ``keep_narrowing=False``: every MatMul is quantized (the budget search chooses what goes back to float)."""
    import nncf
    import onnx

    nncf.set_log_level(logging.ERROR)
    model = onnx.load(str(fp32))
    kept = narrowing_matmuls(model) if keep_narrowing else []
    data = list(feeds)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):  # progress bars
        quantized = nncf.quantize(model, nncf.Dataset(data), subset_size=len(data),
                                  model_type=nncf.ModelType.TRANSFORMER,
                                  preset=nncf.QuantizationPreset.PERFORMANCE,  # symmetric: TensorRT needs zero zero-points
                                  ignored_scope=nncf.IgnoredScope(names=kept, validate=False))
    meta = {p.key: p.value for p in model.metadata_props}  # NNCF may drop them; the record must travel
    del quantized.metadata_props[:]
    for key, value in meta.items():
        entry = quantized.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(quantized, str(out))
    return len(kept)
