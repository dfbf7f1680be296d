"""Per-MatMul mixed precision on an NNCF int8 (QDQ) graph: which MatMuls int8 reached, how much error
each one adds on its own, and the graph with a chosen set of them put back in float.

NNCF's transformer preset smooths activations (``x * c`` before the activation quantizer, weights
scaled by ``1/c`` and stored as int8). A MatMul is put back in float exactly: its activation input
becomes the unsmoothed tensor ``x`` and its weight the fp32 graph's own initializer, so a graph with
every MatMul put back computes what the fp32 graph computes (a test holds it to that). Nothing is
re-calibrated, so one NNCF run serves every candidate of the budget search (`readout_export.targets.budget_search`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from readout_export.errors import GraphError


@dataclass(frozen=True)
class Quantizer:
    """One input of one node that NNCF made int8: an activation (QuantizeLinear -> DequantizeLinear on a
    tensor, smoothed by ``x * c`` where NNCF smoothed it) or a weight (an int8 initializer)."""

    slot: int
    kind: str                       # "activation" or "weight"
    source: str = ""                # activation: the unsmoothed tensor x (a tensor of the fp32 graph too)
    smoothing: np.ndarray | None = None
    scale: np.ndarray | None = None
    zero: np.ndarray | None = None
    weight: np.ndarray | None = None  # weight: the dequantized int8 values, as the QDQ graph computes them
    fp32_weight: str = ""           # weight: the fp32 graph's initializer at this input


@dataclass(frozen=True)
class Unit:
    """A node whose int8 inputs are restored to float together: a MatMul (activation and weight), an
    attention input (the Reshape after a quantized projection) or an embedding table (Gather)."""

    name: str
    op_type: str
    inputs: tuple[Quantizer, ...]


def _consts(model: Any) -> dict[str, np.ndarray]:
    from onnx import numpy_helper

    return {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}


def _dequantize(q: np.ndarray, scale: np.ndarray, zero: np.ndarray, axis: int) -> np.ndarray:
    if scale.ndim == 1 and q.ndim > 1:  # per-axis
        shape = [1] * q.ndim
        shape[axis] = -1
        scale, zero = scale.reshape(shape), zero.reshape(shape)
    return (q.astype(np.float32) - zero.astype(np.float32)) * scale.astype(np.float32)


def _axis(node: Any) -> int:
    return next((a.i for a in node.attribute if a.name == "axis"), 1)


def fake_quantize(x: np.ndarray, scale: np.ndarray, zero: np.ndarray) -> np.ndarray:
    """QuantizeLinear then DequantizeLinear, per tensor (ONNX's rule: round half to even, saturate)."""
    info = np.iinfo(zero.dtype)
    q = np.clip(np.rint(x / scale) + zero.astype(np.float32), info.min, info.max)
    return (q - zero.astype(np.float32)) * scale


def int8_units(quantized: Any, fp32: Any) -> list[Unit]:
    """Every node of ``quantized`` (NNCF's QDQ graph) with an int8 input, in graph order."""
    producer = {o: n for n in quantized.graph.node for o in n.output}
    consts = _consts(quantized)
    fp32_nodes = {n.name: n for n in fp32.graph.node}
    fp32_consts = {i.name for i in fp32.graph.initializer}
    units = []
    for node in quantized.graph.node:
        if node.op_type in ("QuantizeLinear", "DequantizeLinear") or node.name not in fp32_nodes:
            continue
        original = fp32_nodes[node.name]
        found = []
        for slot, x in enumerate(node.input):
            dq = producer.get(x)
            if dq is None or dq.op_type != "DequantizeLinear":
                continue
            args = [consts.get(a) for a in dq.input]
            zero = args[2] if len(args) > 2 and args[2] is not None else np.zeros((), np.uint8)
            if args[0] is not None:  # an int8 initializer: a weight
                if slot >= len(original.input) or original.input[slot] not in fp32_consts:
                    break
                found.append(Quantizer(slot, "weight", weight=_dequantize(args[0], args[1], zero, _axis(dq)),
                                       fp32_weight=original.input[slot]))
                continue
            q = producer.get(dq.input[0])
            if q is None or q.op_type != "QuantizeLinear" or consts.get(q.input[1]) is None:
                break
            smoothed, source, c = q.input[0], q.input[0], None
            mul = producer.get(smoothed)
            if mul is not None and mul.op_type == "Mul" and "smooth" in smoothed:
                const = [a for a in mul.input if a in consts]
                other = [a for a in mul.input if a not in consts]
                if len(const) == 1 and len(other) == 1:
                    source, c = other[0], consts[const[0]].astype(np.float32)
            qzero = consts.get(q.input[2]) if len(q.input) > 2 else None
            found.append(Quantizer(slot, "activation", source=source, smoothing=c,
                                   scale=consts[q.input[1]].astype(np.float32),
                                   zero=qzero if qzero is not None else np.zeros((), np.uint8)))
        else:
            smoothed_alone = any(f.smoothing is not None for f in found) and not any(f.kind == "weight" for f in found)
            if found and not smoothed_alone:  # a smoothed activation is undone only with its weight
                units.append(Unit(node.name, node.op_type, tuple(found)))
    return units


def restore_float(quantized: Any, fp32: Any, names: Iterable[str]) -> Any:
    """A copy of ``quantized`` with the nodes called ``names`` (units of :func:`int8_units`) computing in
    float again, exactly as in ``fp32``; quantizers nothing reads any more are removed."""
    import onnx

    model = onnx.ModelProto()
    model.CopyFrom(quantized)
    wanted = set(names)
    by_name = {u.name: u for u in int8_units(quantized, fp32) if u.name in wanted}
    missing = wanted - set(by_name)
    if missing:
        raise GraphError(f"not int8 nodes of this graph: {sorted(missing)}")
    fp32_init = {i.name: i for i in fp32.graph.initializer}
    fp32_nodes = {n.name: n for n in fp32.graph.node}
    have = {i.name for i in model.graph.initializer}

    def original(node: Any, slot: int) -> None:  # the fp32 graph's initializer at this input
        name = fp32_nodes[node.name].input[slot]
        copy = f"{name}/float"
        if copy not in have:
            init = onnx.TensorProto()
            init.CopyFrom(fp32_init[name])
            init.name = copy
            model.graph.initializer.append(init)
            have.add(copy)
        node.input[slot] = copy

    restored_outputs = set()
    for node in model.graph.node:
        unit = by_name.get(node.name)
        for q in unit.inputs if unit else ():
            if q.kind == "activation":
                node.input[q.slot] = q.source
            else:
                original(node, q.slot)
        if unit:
            restored_outputs.update(node.output)
    # NNCF's bias correction moved the bias after a quantized MatMul to offset its error: put it back too
    for node in model.graph.node:
        if node.op_type == "Add" and node.name in fp32_nodes and restored_outputs & set(node.input):
            for slot, x in enumerate(node.input):
                if x in have and fp32_nodes[node.name].input[slot] in fp32_init:
                    original(node, slot)
    _prune(model)
    return model


def _prune(model: Any) -> None:
    """Drop nodes and initializers no graph output depends on (the bypassed Q/DQ pairs)."""
    needed = {o.name for o in model.graph.output}
    keep = []
    for node in reversed(model.graph.node):
        if any(o in needed for o in node.output):
            keep.append(node)
            needed.update(x for x in node.input if x)
    keep.reverse()
    del model.graph.node[:]
    model.graph.node.extend(keep)
    used = [i for i in model.graph.initializer if i.name in needed]
    del model.graph.initializer[:]
    model.graph.initializer.extend(used)


def local_errors(fp32: Any, units: list[Unit], feeds: list[dict[str, np.ndarray]]) -> dict[str, float]:
    """Each unit's own relative error with the fp32 graph's tensors as its inputs on ``feeds`` (so errors
    upstream do not count): for a MatMul ``||FQ(x*c) @ W_int8 - x @ W|| / ||x @ W||``, for an activation
    alone ``||FQ(x) - x|| / ||x||``, for a weight alone ``||W_int8 - W|| / ||W||``. The sensitivity the
    budget search ranks units by."""
    import onnx
    import onnxruntime as ort
    from onnx import helper

    probe = onnx.ModelProto()
    probe.CopyFrom(fp32)
    sources = sorted({q.source for u in units for q in u.inputs if q.kind == "activation"})
    known = {o.name for o in probe.graph.output}
    for name in sources:
        if name not in known:
            probe.graph.output.append(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    weights = _consts(fp32)
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # keep every probed tensor
    session = ort.InferenceSession(probe.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    err = {u.name: 0.0 for u in units}
    ref = {u.name: 0.0 for u in units}
    for feed in feeds:
        values = dict(zip(sources, session.run(sources, feed))) if sources else {}
        for u in units:
            acts = [q for q in u.inputs if q.kind == "activation"]
            ws = [q for q in u.inputs if q.kind == "weight"]
            if u.op_type == "MatMul" and len(acts) == 1 and len(ws) == 1:
                a, w = acts[0], ws[0]
                x = values[a.source].astype(np.float32)
                exact_w = weights[w.fp32_weight].astype(np.float32)
                xs = x * a.smoothing if a.smoothing is not None else x
                xq = fake_quantize(xs, a.scale, a.zero)
                pair = ((xq, w.weight), (x, exact_w)) if a.slot == 0 else ((w.weight, xq), (exact_w, x))
                approx, exact = pair[0][0] @ pair[0][1], pair[1][0] @ pair[1][1]
            elif acts and not ws:
                exact = np.concatenate([values[q.source].ravel() for q in acts])
                approx = np.concatenate([fake_quantize(values[q.source], q.scale, q.zero).ravel() for q in acts])
            elif ws and not acts:
                exact = np.concatenate([weights[q.fp32_weight].ravel() for q in ws])
                approx = np.concatenate([q.weight.ravel() for q in ws])
            else:
                continue
            err[u.name] += float(np.sum((approx - exact) ** 2))
            ref[u.name] += float(np.sum(exact ** 2))
    return {k: (err[k] / ref[k]) ** 0.5 if ref[k] > 0 else 0.0 for k in err}
