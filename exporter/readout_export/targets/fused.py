"""The onnx-fp16-fused target: the backbone rewritten to ONNX Runtime's fused transformer operators
(Attention, SkipLayerNormalization, BiasGelu: its `com.microsoft` contrib operators, which its CUDA
provider runs as fused kernels), in fp16, with the readout tail untouched and fp32.

ONNX Runtime's own optimizer (`onnxruntime.transformers.optimizer`) does the fusing; three things stand in
its way on this exporter's graphs, and are moved aside here:

1. **The attention mask.** transformers 5 builds one additive mask as ``Where(And(..GatherND(mask)..), 0,
   min)``, a form the attention fusion does not recognise ("failed to match mask path"). Each Softmax's
   mask is rewritten to the form it does (``Where(Cast<bool>(Sub(1, Expand(Unsqueeze(Unsqueeze(m))))),
   -1e4, 0)``), ``m`` being the [batch, sequence] mask the backbone actually sees: the graph has already
   moved each row's valid tokens to the front (that is how left padding stays exact), so the fused
   Attention's per-row lengths are right whatever the padding side.
2. **The readout tail.** Symbolic shape inference cannot type some of its operators (ReduceL2 with axes as
   an input), and without shapes SkipLayerNormalization is not fused. The tail (the nodes after the
   backbone that only the outputs need) is cut off, the backbone optimized and converted to fp16 with the
   tail's inputs as graph outputs (so they stay fp32), and the tail spliced back unchanged.
3. **Silence.** A fusion that does not match leaves the graph as it was; the recipe counts the fused
   Attention nodes and refuses a graph where any attention block was left unfused.

TensorRT does not run contrib operators: its engines compile from the plain onnx-fp16 graph.
"""
from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any

from readout_export.errors import GraphError, ReadoutExportError

MASK_FILL = -10000.0  # what the fusion's mask pattern adds at masked positions (its documented constant)


class FusionIncomplete(ReadoutExportError, ValueError):
    """ONNX Runtime fused fewer attention blocks than the graph has; the fused recipe reports it as a
    manifest error naming the target (use onnx-fp16): exit 2."""

    exit_code = 2


def make_fused_graph(fp32: Path, out: Path, num_heads: int, hidden_size: int) -> dict[str, int]:
    """Write the fused fp16 graph; return the fused operators ONNX Runtime reports (by type). The ABI
    record (metadata) is kept."""
    import onnx
    from onnx import helper
    from onnxruntime.transformers.fusion_options import FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    from readout_export.targets.fp16 import FP32_OPS, unique_nodes

    model = onnx.load(str(fp32))
    meta = [(p.key, p.value) for p in model.metadata_props]
    outputs = [onnx.ValueInfoProto.FromString(o.SerializeToString()) for o in model.graph.output]
    blocks = sum(1 for n in model.graph.node if n.op_type == "Softmax")
    _rewrite_masks(model)
    tail = _cut_tail(model)
    options = FusionOptions("bert")
    quiet = logging.getLogger("onnxruntime.transformers")  # e.g. "Model producer not matched": expected here
    level = quiet.level
    quiet.setLevel(logging.ERROR)
    try:
        optimized = optimize_model(model, model_type="bert", num_heads=num_heads, hidden_size=hidden_size,
                                   optimization_options=options, opt_level=0, use_gpu=True)
    except Exception as e:  # its own checks are bare asserts (e.g. hidden size not a multiple of the heads)
        raise FusionIncomplete(f"ONNX Runtime's transformer optimizer failed on this graph ({type(e).__name__}"
                               f"{': ' + str(e).splitlines()[0] if str(e).strip() else ''}; {num_heads} heads, "
                               f"hidden size {hidden_size}); use onnx-fp16") from None
    finally:
        quiet.setLevel(level)
    fused_counts = {k: v for k, v in optimized.get_fused_operator_statistics().items() if v}
    attention = fused_counts.get("Attention", 0) + fused_counts.get("MultiHeadAttention", 0)
    if attention < blocks:
        raise FusionIncomplete(f"ONNX Runtime fused {attention} of the graph's {blocks} attention blocks "
                               f"({describe(fused_counts)}); this architecture's attention is not in a form its "
                               "fusion recognises: use onnx-fp16")
    # the tail's inputs are graph outputs now: keep_io_types keeps them fp32, so the whole tail stays fp32
    optimized.convert_float_to_float16(keep_io_types=True, op_block_list=FP32_OPS)
    result = optimized.model
    unique_nodes(result)  # ONNX Runtime <= 1.31's converter repeats Casts under one name (see fp16.py)
    nodes, initializers, made = tail
    have = {i.name for i in result.graph.initializer}
    result.graph.initializer.extend(i for i in initializers if i.name not in have)
    live = {o for n in result.graph.node for o in n.output}
    kept = [v for v in result.graph.value_info if v.name in live and v.name not in made]  # drop stale types
    del result.graph.value_info[:]
    result.graph.value_info.extend(kept)
    result.graph.node.extend(nodes)
    del result.graph.output[:]
    result.graph.output.extend(outputs)
    _toposort(result.graph)
    if not any(o.domain == "com.microsoft" for o in result.opset_import):
        result.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    del result.metadata_props[:]
    for key, value in meta:
        entry = result.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.checker.check_model(result)
    onnx.save(result, str(out))
    return fused_counts


def describe(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "nothing fused"


def _types(model: Any) -> dict[str, Any]:
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    return {v.name: v for v in [*inferred.graph.value_info, *inferred.graph.input, *inferred.graph.output]}


def _rewrite_masks(model: Any) -> int:
    """Give every Softmax's additive mask the form ONNX Runtime's attention fusion matches; return how many
    distinct masks were rewritten."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    producer = {o: n for n in graph.node for o in n.output}
    types = _types(model)

    def mask_2d(name: str) -> str | None:  # the nearest [batch, sequence] integer or boolean ancestor
        queue, seen = [name], set()
        while queue:
            tensor = queue.pop(0)
            info = types.get(tensor)
            if info is not None:
                t = info.type.tensor_type
                if len(t.shape.dim) == 2 and t.elem_type in (TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL):
                    return tensor
            node = producer.get(tensor)
            if node is not None and tensor not in seen:
                seen.add(tensor)
                queue.extend(i for i in node.input if i)
        return None

    rewritten: dict[str, str] = {}
    for softmax in [n for n in graph.node if n.op_type == "Softmax"]:
        add = producer.get(softmax.input[0])
        if add is None or add.op_type != "Add":
            continue
        for k, name in enumerate(add.input):
            where = producer.get(name)
            if where is None or where.op_type != "Where":
                continue
            if name not in rewritten:
                source = mask_2d(where.input[0])
                if source is None:
                    continue
                p = f"readout_fused_mask_{len(rewritten)}"
                graph.initializer.extend([
                    numpy_helper.from_array(np.array([1], np.int64), p + "_axis1"),
                    numpy_helper.from_array(np.array([2], np.int64), p + "_axis2"),
                    numpy_helper.from_array(np.array([1, 1, 1, 1], np.int64), p + "_shape"),
                    numpy_helper.from_array(np.array(1, np.int64), p + "_one"),
                    numpy_helper.from_array(np.array(MASK_FILL, np.float32), p + "_fill"),
                    numpy_helper.from_array(np.array(0.0, np.float32), p + "_zero")])
                graph.node.extend([
                    helper.make_node("Cast", [source], [p + "_int"], p + "_CastInt", to=TensorProto.INT64),
                    helper.make_node("Unsqueeze", [p + "_int", p + "_axis1"], [p + "_u1"], p + "_Unsqueeze1"),
                    helper.make_node("Unsqueeze", [p + "_u1", p + "_axis2"], [p + "_u2"], p + "_Unsqueeze2"),
                    helper.make_node("Expand", [p + "_u2", p + "_shape"], [p + "_expanded"], p + "_Expand"),
                    helper.make_node("Sub", [p + "_one", p + "_expanded"], [p + "_masked"], p + "_Sub"),
                    helper.make_node("Cast", [p + "_masked"], [p + "_bool"], p + "_CastBool", to=TensorProto.BOOL),
                    helper.make_node("Where", [p + "_bool", p + "_fill", p + "_zero"], [p], p + "_Where")])
                rewritten[name] = p
            add.input[k] = rewritten[name]
    _toposort(graph)
    return len(rewritten)


def _cut_tail(model: Any) -> tuple[list[Any], list[Any], set[str]]:
    """Remove the readout tail from ``model`` (its inputs become graph outputs); return its nodes, their
    initializers and the tensors they make, to splice back after optimizing."""
    from readout_export.targets.fp16 import BACKBONE_END, readout_tail

    graph = model.graph
    producer = {o: n for n in graph.node for o in n.output}

    needed: set[str] = set()  # what the backbone itself needs (the row compaction in front feeds it too)
    stack = [i for n in graph.node if n.op_type in BACKBONE_END for i in n.input]
    while stack:
        node = producer.get(stack.pop())
        if node is None or node.name in needed:
            continue
        needed.add(node.name)
        stack.extend(node.input)
    names = set(readout_tail(model)) - needed
    nodes = [n for n in graph.node if n.name in names]
    initializers = {i.name: i for i in graph.initializer}
    made = {o for n in nodes for o in n.output}
    boundary = list(dict.fromkeys(i for n in nodes for i in n.input if i and i not in made and i not in initializers))
    used = {i: initializers[i] for n in nodes for i in n.input if i in initializers}
    types = _types(model)
    keep = [n for n in graph.node if n.name not in names]
    del graph.node[:]
    graph.node.extend(keep)
    del graph.output[:]
    graph.output.extend(types[b] for b in boundary)
    return nodes, list(used.values()), made


def _toposort(graph: Any) -> None:
    have = {i.name for i in graph.input} | {i.name for i in graph.initializer} | {""}
    todo, order = list(graph.node), []
    while todo:
        rest = []
        for node in todo:
            if all(i in have for i in node.input):
                order.append(node)
                have.update(node.output)
            else:
                rest.append(node)
        if len(rest) == len(todo):
            raise GraphError("fused graph: a node's input is never produced")
        todo = rest
    del graph.node[:]
    graph.node.extend(order)


def op_counts(path: Path) -> Counter:
    """Operator types in a graph file (what the build log and tests report)."""
    import onnx

    return Counter(n.op_type for n in onnx.load(str(path), load_external_data=False).graph.node)
