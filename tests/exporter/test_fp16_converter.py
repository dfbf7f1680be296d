"""onnx-fp16 builds whatever ONNX Runtime's float16 converter does: the converter shipped up to 1.31
(onnxruntime-gpu's newest wheel) writes one Cast per consumer, all with one node name and one output name,
and ONNX Runtime refuses that graph ("two nodes with same node name"). Oracle: ONNX Runtime itself (it
loads the graph) and the graph the de-duplicating converter (1.32) writes from the same fp32 graph.
Model: a SYNTHETIC tiny BERT sentiment classifier (the session's shared "classify" artifact; the repeated
Casts appear in every BERT-style graph, MiniLM's included)."""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest


def _as_131(convert):
    """The converter as ONNX Runtime 1.31 ran it: every Cast it inserts in front of an fp32-kept node is
    repeated once per consumer, same node name, same output name, same value_info (1.32 shares one)."""
    def wrapped(model, **kwargs):
        half = convert(model, **kwargs)
        graph = half.graph
        consumers = Counter(i for n in graph.node for i in n.input)
        extra, infos = [], []
        for node in graph.node:
            if node.op_type == "Cast" and node.name.endswith("_cast_to_fp32_node"):
                for _ in range(consumers[node.output[0]] - 1):
                    copy = onnx.NodeProto()
                    copy.CopyFrom(node)
                    extra.append(copy)
                    infos += [v for v in graph.value_info if v.name == node.output[0]][:1]
        graph.node.extend(extra)
        graph.value_info.extend([onnx.ValueInfoProto.FromString(v.SerializeToString()) for v in infos])
        return half
    return wrapped


def _run(path: Path, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: feed[i.name] for i in session.get_inputs()})


def test_fp16_graph_from_the_131_converter_has_unique_names_and_runs(shared, tmp_path, monkeypatch):
    import onnxruntime.transformers.float16 as converter

    from readout_export.targets.fp16 import make_fp16_graph

    fp32 = shared("classify")[1] / "model.onnx-fp32.onnx"
    shared_casts = tmp_path / "shared.onnx"
    make_fp16_graph(fp32, shared_casts)  # the installed converter, whatever it does
    monkeypatch.setattr(converter, "convert_float_to_float16", _as_131(converter.convert_float_to_float16))
    repeated = tmp_path / "as-131.onnx"
    make_fp16_graph(fp32, repeated)

    graph = onnx.load(str(repeated)).graph
    assert max(Counter(n.name for n in graph.node).values()) == 1
    assert max(Counter(o for n in graph.node for o in n.output).values()) == 1
    assert max(Counter(v.name for v in graph.value_info).values()) == 1
    assert len(graph.node) == len(onnx.load(str(shared_casts)).graph.node)
    from tokenizers import Tokenizer

    enc = Tokenizer.from_file(str(fp32.parent / "tokenizer.json")).encode("A kitten naps on the rug.")
    ids = np.array([enc.ids], np.int64)
    feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    for a, b in zip(_run(repeated, feed), _run(shared_casts, feed)):
        np.testing.assert_array_equal(a, b)


def test_two_different_writers_of_one_output_are_refused_by_name():
    from readout_export.targets.fp16 import unique_nodes

    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"], name="a"),
                                    onnx.helper.make_node("Neg", ["x"], ["y"], name="a")], "g", [x], [y])
    with pytest.raises(ValueError, match="two different nodes write 'y'"):
        unique_nodes(onnx.helper.make_model(graph))
