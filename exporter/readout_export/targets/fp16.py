"""The onnx-fp16 target: a strongly typed fp16 graph whose numerically fragile ops stay fp32.

BERT-style graphs overflow or lose the result in fp16 in LayerNorm (variance of large activations),
softmax (exp), the L2 normalization and the pooling reductions (sums over up to max_length rows).
ONNX Runtime's float16 converter rewrites everything else to fp16 and inserts explicit Casts around
the blocked ops, so the graph states every tensor's type: TensorRT 11 (which dropped the fp16 builder
flag) builds it as a strongly typed network, and TensorRT 10 (JetPack) does too. Inputs and outputs
keep their ABI types (int64 ids in, fp32 results out), and the readout tail after the last matrix
multiply stays fp32 as a whole.
"""
from __future__ import annotations

from pathlib import Path

from readout_export.errors import GraphError

# ops kept in fp32: normalization, softmax, reductions, and the elementwise ops of L2 / pooling / GELU's erf
FP32_OPS = ["LayerNormalization", "SimplifiedLayerNormalization", "Softmax", "LogSoftmax", "ReduceMean", "ReduceSum",
            "ReduceL2", "ReduceMax", "ReduceMin", "ReduceSumSquare", "Pow", "Sqrt", "Reciprocal", "Div", "Erf",
            "Exp", "Log", "CumSum", "TopK", "Range", "Min", "Max"]


HEAVY = {"MatMul", "Gemm", "MatMulInteger", "Conv", "Attention"}
BACKBONE_END = HEAVY | {"LayerNormalization", "SimplifiedLayerNormalization"}


def readout_tail(model: object) -> list[str]:
    """Nodes between the backbone's last matrix multiply or LayerNorm and the graph outputs (pooling, normalization, zero-row
    NaN, head activations): kept fp32 so that, e.g., an L2-normalized vector is unit-norm in fp32, not
    rounded to fp16 after the division."""
    producer = {o: n for n in model.graph.node for o in n.output}  # type: ignore[attr-defined]
    seen: set[str] = set()
    stack = [o.name for o in model.graph.output]  # type: ignore[attr-defined]
    while stack:
        node = producer.get(stack.pop())
        if node is None or node.name in seen or node.op_type in BACKBONE_END:
            continue
        seen.add(node.name)
        stack.extend(node.input)
    return sorted(seen)


def make_fp16_graph(fp32: Path, out: Path) -> int:
    """Write the fp16 graph; return how many nodes stayed fp32. The ABI record (metadata) is kept."""
    import onnx
    from onnxruntime.transformers.float16 import convert_float_to_float16

    model = onnx.load(str(fp32))
    meta = [(p.key, p.value) for p in model.metadata_props]
    tail = readout_tail(model)
    half = convert_float_to_float16(model, keep_io_types=True, op_block_list=FP32_OPS, node_block_list=tail)
    unique_nodes(half)
    _drop_round_trips(half)
    del half.metadata_props[:]
    for key, value in meta:
        entry = half.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(half, str(out))
    return sum(1 for n in half.graph.node if n.op_type in FP32_OPS or n.name in set(tail))


def unique_nodes(model: object) -> int:
    """Make every node and value name unique, whatever the converter did; return how many nodes were dropped.

    ONNX Runtime's converter up to 1.31 (onnxruntime-gpu's newest wheel) inserts one Cast per consumer when
    an fp16 tensor feeds several fp32-kept nodes, each with the same node name, output name and value_info
    entry; ONNX Runtime then refuses the graph ("two nodes with same node name"). Such copies compute the
    same value, so all but the first are dropped. Any other node whose name repeats is renamed; two
    different nodes writing one output cannot be repaired and are refused, naming the output."""
    graph = model.graph  # type: ignore[attr-defined]
    seen: dict[bytes, str] = {}
    writer: dict[str, bytes] = {}
    keep = []
    for node in graph.node:
        key = node.SerializeToString(deterministic=True)
        if key in seen:
            continue  # an exact copy: same op, inputs, outputs and attributes
        for out in node.output:
            if out and out in writer:
                raise GraphError(f"fp16 conversion: two different nodes write {out!r}; the graph cannot be repaired")
            writer[out] = key
        seen[key] = node.name
        keep.append(node)
    dropped = len(graph.node) - len(keep)
    names: set[str] = set()
    for node in keep:
        base, k = node.name, 1
        while node.name in names:
            node.name, k = f"{base}_{k}", k + 1
        names.add(node.name)
    if dropped:
        del graph.node[:]
        graph.node.extend(keep)
    values = {}
    for v in graph.value_info:
        values.setdefault(v.name, v)
    if len(values) != len(graph.value_info):
        kept = list(values.values())
        del graph.value_info[:]
        graph.value_info.extend(kept)
    return dropped


def _drop_round_trips(model: object) -> None:
    """Remove Cast(fp32->fp16)->Cast(fp16->fp32) pairs the converter leaves between kept-fp32 nodes and in
    front of the outputs (they would round an fp32 value to fp16 and back). A pair is dropped only where
    shape inference says its source is fp32 (never an integer tensor cast through fp16)."""
    import onnx

    graph = model.graph  # type: ignore[attr-defined]
    fresh = onnx.ModelProto()
    fresh.CopyFrom(model)  # type: ignore[arg-type]
    del fresh.graph.value_info[:]  # the converter leaves stale types there; infer them anew
    inferred = onnx.shape_inference.infer_shapes(fresh)
    types = {v.name: v.type.tensor_type.elem_type for v in list(inferred.graph.value_info)
             + list(inferred.graph.input) + list(inferred.graph.output)}
    producer = {o: n for n in graph.node for o in n.output}
    to = lambda n: next((a.i for a in n.attribute if a.name == "to"), None)  # noqa: E731
    floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16)

    def elem_type(name: str, depth: int = 0) -> int | None:
        """Inferred type, else followed through the producer (a Cast's target, else its float input's)."""
        if types.get(name):
            return types[name]
        node = producer.get(name)
        if node is None or depth > 6:
            return None
        if node.op_type == "Cast":
            return to(node)
        seen = [t for t in (elem_type(i, depth + 1) for i in node.input if i) if t in floats]
        return seen[-1] if seen else None

    rename: dict[str, str] = {}
    drop = []
    for node in graph.node:
        if node.op_type != "Cast" or to(node) != onnx.TensorProto.FLOAT:
            continue
        first = producer.get(node.input[0])
        if first is None or first.op_type != "Cast" or to(first) != onnx.TensorProto.FLOAT16:
            continue
        if elem_type(first.input[0]) != onnx.TensorProto.FLOAT:
            continue
        rename[node.output[0]] = first.input[0]
        drop.append(node)
    if not drop:
        return
    outputs = {o.name for o in graph.output}
    for node in drop:
        out, src = node.output[0], rename[node.output[0]]
        if out in outputs:  # keep the output's name: make the fp32 producer write it directly
            for n in graph.node:
                n.output[:] = [out if o == src else o for o in n.output]
                n.input[:] = [out if i == src else i for i in n.input]
        else:
            for n in graph.node:
                n.input[:] = [src if i == out else i for i in n.input]
        graph.node.remove(node)
    used = {i for n in graph.node for i in n.input} | outputs
    for node in [n for n in graph.node if n.op_type == "Cast" and not set(n.output) & used]:
        graph.node.remove(node)
