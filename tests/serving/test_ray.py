"""Ray Data bulk encoding: `readout_sdk.serving.ray.Predictor` (every family's typed columns, input columns kept,
clashes refused) and `readout-export encode` on a local 2-CPU Ray cluster over a few thousand rows
(JSONL and Parquet): every row comes back exactly once, equal to the SDK run directly.

Models: SYNTHETIC tiny BERT/RoBERTa/DistilBERT heads (tests/helpers/synthetic.py), REAL all-MiniLM-L6-v2 and
SPLADE-tiny."""
from __future__ import annotations

import json
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import readout_sdk
from helpers.corpus import PAIRS, TEXTS
from readout_export.cli import main
from readout_sdk.errors import InputRefused
from readout_sdk.serving.ray import Predictor

TEXT_FAMILIES = ["embedding", "classify", "multilabel", "regression", "tag-bert", "sparse", "late"]


def _table(key: str) -> tuple[pa.Table, list]:
    """An input table (an id column plus the family's fields) and the SDK's direct results for it."""
    if key == "cross":
        q, d = zip(*PAIRS)
        return pa.table({"id": range(len(q)), "query": q, "document": d}), list(PAIRS)
    if key == "qa":
        q, c = zip(*PAIRS)
        return pa.table({"id": range(len(q)), "question": q, "context": c}), list(PAIRS)
    if key == "choice":
        rows = [(q, json.dumps([d, "an unrelated choice", q])) for q, d in PAIRS]
        return pa.table({"id": range(len(rows)), "question": [r[0] for r in rows], "choices": [r[1] for r in rows]}), rows
    return pa.table({"id": range(len(TEXTS)), "text": TEXTS}), list(TEXTS)


@pytest.mark.parametrize("key", TEXT_FAMILIES + ["cross", "qa", "choice"])
def test_predictor_appends_the_sdks_typed_columns(shared, key):
    art = shared(key)[1]
    engine = readout_sdk.load(art, target="onnx-fp32")
    table, items = _table(key)
    out = Predictor(art, target="onnx-fp32")(table)
    assert out.column_names[:len(table.column_names)] == table.column_names
    assert out.column("id").to_pylist() == table.column("id").to_pylist()  # input columns untouched, in order
    rows = out.to_pylist()
    if key == "embedding":
        assert out.schema.field("embedding").type == pa.list_(pa.float32())
        np.testing.assert_array_equal(np.array([r["embedding"] for r in rows], np.float32), engine.embed(items).vectors)
    elif key in ("classify",):
        assert [(r["label"], r["scores"]) for r in rows] == [(e.label, e.scores) for e in engine.classify(items)]
    elif key == "multilabel":
        assert [(r["labels"], r["scores"]) for r in rows] == [(list(e.labels), e.scores) for e in engine.classify(items)]
    elif key == "regression":
        assert [r["values"] for r in rows] == [e.values for e in engine.classify(items)]
    elif key == "tag-bert":
        assert [r["entities"] for r in rows] == [
            [{"label": e.label, "start": e.start, "end": e.end, "text": e.text, "score": e.score} for e in t]
            for t in engine.tag(items)]
        assert all(items[i][e["start"]:e["end"]] == e["text"] for i, r in enumerate(rows) for e in r["entities"])
    elif key == "sparse":
        for r, e in zip(rows, engine.sparse_encode(items)):
            assert r["indices"] == e.indices.tolist() and r["tokens"] == list(e.tokens)
            np.testing.assert_array_equal(np.array(r["values"], np.float32), e.values)
    elif key == "late":
        assert out.schema.field("token_vectors").type == pa.list_(pa.list_(pa.float32()))
        for r, e in zip(rows, engine.encode_tokens(items)):
            np.testing.assert_array_equal(np.array(r["token_vectors"], np.float32).reshape(e.vectors.shape), e.vectors)
            assert r["tokens"] == list(e.tokens)
    elif key == "cross":
        assert [r["score"] for r in rows] == [e.score for e in engine.score_pairs(items)]
    elif key == "qa":
        assert [(r["answer"], r["start"], r["end"], r["score"]) for r in rows] == [
            (a.text, a.start, a.end, a.score) for a in (engine.answer(q, c) for q, c in items)]
    elif key == "choice":
        assert [(r["index"], r["choice"], r["scores"]) for r in rows] == [
            (c.index, c.choice, list(c.scores)) for c in (engine.choose(q, json.loads(ch)) for q, ch in items)]


def test_clashing_columns_are_refused_and_prefix_renames(shared):
    art = shared("classify")[1]
    table = pa.table({"text": ["good", "bad"], "label": ["gold-1", "gold-2"]})
    with pytest.raises(InputRefused, match="label would be overwritten"):
        Predictor(art, target="onnx-fp32")(table)
    out = Predictor(art, target="onnx-fp32", prefix="pred_")(table)
    assert out.column("label").to_pylist() == ["gold-1", "gold-2"]
    assert out.column("pred_label").to_pylist() == [c.label for c in readout_sdk.load(art, target="onnx-fp32").classify(["good", "bad"])]
    with pytest.raises(InputRefused, match="no column 'body'"):
        Predictor(art, columns={"text": "body"})(pa.table({"text": ["good"]}))
    with pytest.raises(InputRefused, match="no field query"):
        Predictor(art, columns={"query": "q"})


def test_output_types_are_fixed_per_family_whatever_the_batch_holds(shared):
    """A batch with no entities must write the same schema as one with entities (Parquet files must read as one)."""
    art = shared("tag-bert")[1]
    predictor = Predictor(art, target="onnx-fp32")
    schemas = {str(predictor(pa.table({"text": [t]})).schema) for t in TEXTS}
    assert len(schemas) == 1
    assert "entities: list<item: struct<label: string, start: int64, end: int64, text: string, score: double>>" in schemas.pop()


@pytest.mark.heavy
def test_encode_jsonl_on_a_local_cluster_returns_every_row_once(shared, tmp_path):
    art = shared("classify")[1]
    rng = np.random.default_rng(1)
    texts = [" ".join(rng.choice(TEXTS, rng.integers(1, 4))) for _ in range(3000)]
    src = tmp_path / "in.jsonl"
    # input columns come back as given: "007"-like ids and ISO dates stay strings
    src.write_text("".join(json.dumps({"id": f"{i:07d}", "text": t, "n": i, "day": "2024-01-02"}) + "\n"
                           for i, t in enumerate(texts)))
    result = CliRunner().invoke(main, ["encode", str(art), "--input", str(src), "--output", str(tmp_path / "out"),
                                       "--num-cpus", "2", "--actors", "2", "--target", "onnx-fp32", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output.strip().splitlines()[-1])
    assert summary["rows"] == 3000
    written = pq.read_table(tmp_path / "out")
    assert written.column_names == ["id", "text", "n", "day", "label", "score", "scores", "truncated", "abstained"]
    from readout_sdk.release.stored import check_stored

    engine = readout_sdk.load(art, target="onnx-fp32")
    assert written.schema.metadata[b"readout.release_id"].decode() == engine.release_id
    assert check_stored(tmp_path / "out", engine).valid  # every file carries the release's vector key
    rows = written.to_pylist()
    assert sorted(r["n"] for r in rows) == list(range(3000))  # every row once
    expected = readout_sdk.load(art, target="onnx-fp32").classify(texts)
    for r in rows:
        e = expected[r["n"]]
        assert r["id"] == f"{r['n']:07d}" and r["text"] == texts[r["n"]] and r["day"] == "2024-01-02"
        assert r["label"] == e.label and r["scores"] == pytest.approx(e.scores, abs=1e-6)


@pytest.mark.heavy
def test_encode_parquet_with_a_named_column_keeps_entities_offsets(shared, tmp_path, capfd):
    import logging

    art = shared("tag-bert")[1]
    texts = (TEXTS * 200)[:2000]
    pq.write_table(pa.table({"key": list(range(len(texts))), "body": texts}), tmp_path / "in.parquet")
    result = CliRunner().invoke(main, ["encode", str(art), "--input", str(tmp_path / "in.parquet"), "--output",
                                       str(tmp_path / "out"), "--column", "body", "--num-cpus", "2",
                                       "--target", "onnx-fp32"])
    assert result.exit_code == 0, result.output
    assert "encoded 2000 rows" in result.output
    # on its own local cluster: one summary line, no Ray Data INFO / WARNING lines, its log level given back
    err = capfd.readouterr().err + result.output
    assert "execution finished" not in err and "Progress bars disabled" not in err, err
    assert logging.getLogger("ray.data").level < logging.ERROR  # what Ray Data set it to, not our ERROR
    rows = pq.read_table(tmp_path / "out").to_pylist()
    assert sorted(r["key"] for r in rows) == list(range(2000))
    tagged = readout_sdk.load(art, target="onnx-fp32").tag(texts[:len(TEXTS)])
    for r in rows:
        e = tagged[r["key"] % len(TEXTS)]
        assert [(x["label"], x["start"], x["end"], x["text"]) for x in r["entities"]] == [
            (x.label, x.start, x.end, x.text) for x in e.entities]
    again = CliRunner().invoke(main, ["encode", str(art), "--input", str(tmp_path / "in.parquet"), "--output",
                                      str(tmp_path / "out"), "--column", "body"])
    assert again.exit_code == 2 and "not an empty directory" in again.output


@pytest.mark.heavy
def test_a_failed_encode_leaves_no_output_and_names_the_row(shared, tmp_path):
    art = shared("classify")[1]
    src = tmp_path / "in.jsonl"
    rows = [{"id": f"r{i}", "text": TEXTS[i % len(TEXTS)]} for i in range(600)]
    rows[590]["text"] = "   "  # refused by the SDK (no content tokens), late in the file
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = CliRunner().invoke(main, ["encode", str(art), "--input", str(src), "--output", str(tmp_path / "out"),
                                       "--num-cpus", "2", "--batch-size", "100", "--target", "onnx-fp32"])
    assert result.exit_code == 2, result.output
    message = next(line for line in result.output.splitlines() if line.startswith("error: "))
    assert message.startswith("error: item ") and "no content tokens" in message and "Failed to apply" not in message
    start = int(re.search(r"starting at id='r(\d+)'", message).group(1))  # the batch, named by its id
    assert start <= 590 < start + 100
    assert not (tmp_path / "out").exists() and not list(tmp_path.glob(".out.partial-*"))
    too_many = CliRunner().invoke(main, ["encode", str(art), "--input", str(src), "--output", str(tmp_path / "o2"),
                                         "--num-cpus", "2", "--actors", "3"])
    assert too_many.exit_code == 2 and "would wait for them forever" in too_many.output
    missing = CliRunner().invoke(main, ["encode", str(art), "--input", str(src), "--output", str(tmp_path / "o3"),
                                        "--column", "body"])  # checked before any cluster starts
    assert missing.exit_code == 2 and "no column 'body'" in missing.output


@pytest.mark.heavy
def test_encode_on_a_cluster_given_by_address(shared, tmp_path):
    """A cluster started apart (`ray start --head`), as a user's would be; encode connects and leaves it running."""
    import subprocess
    import sys
    from pathlib import Path

    from helpers.triton_server import free_ports

    ray_cli = str(Path(sys.executable).parent / "ray")
    (port,) = free_ports(1)
    started = subprocess.run([ray_cli, "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
                              "--disable-usage-stats"], capture_output=True, text=True)
    assert started.returncode == 0, started.stderr
    try:
        art = shared("classify")[1]
        texts = (TEXTS * 30)[:300]
        src = tmp_path / "in.jsonl"
        src.write_text("".join(json.dumps({"i": i, "text": t}) + "\n" for i, t in enumerate(texts)))
        address = f"127.0.0.1:{port}"
        refused = CliRunner().invoke(main, ["encode", str(art), "--input", str(src), "--output", str(tmp_path / "x"),
                                            "--address", address, "--num-cpus", "2"])
        assert refused.exit_code == 2 and "a cluster given by --address has its own CPUs" in refused.output
        result = CliRunner().invoke(main, ["encode", str(art), "--input", str(src), "--output", str(tmp_path / "out"),
                                           "--address", address, "--target", "onnx-fp32"])
        assert result.exit_code == 0, result.output
        rows = pq.read_table(tmp_path / "out").to_pylist()
        assert sorted(r["i"] for r in rows) == list(range(len(texts)))
        expected = readout_sdk.load(art, target="onnx-fp32").classify(texts)
        assert all(r["label"] == expected[r["i"]].label for r in rows)
        status = subprocess.run([ray_cli, "status", f"--address={address}"], capture_output=True, text=True)
        assert status.returncode == 0  # the user's cluster is still up: encode only disconnected
    finally:
        subprocess.run([ray_cli, "stop", "--force"], capture_output=True)


def test_threads_bound_each_runtime_so_actors_do_not_oversubscribe(shared):
    """Predictor gives load() the CPUs Ray assigned its actor; load(threads=N) must hold both runtimes to N."""
    from readout_sdk.serving.ray import _assigned_cpus

    art = shared("classify")[1]
    assert _assigned_cpus() is None  # outside a Ray worker: the runtime's own default (every CPU)
    bounded = readout_sdk.load(art, target="onnx-fp32", backend="onnxruntime", threads=1).execution
    assert bounded["intra_op_threads"] == 1 and bounded["spinning"] is False  # a shared machine: workers sleep
    assert readout_sdk.load(art, target="onnx-fp32", backend="onnxruntime").execution["spinning"] is True
    ov = readout_sdk.load(art, target="onnx-fp32", backend="openvino", threads=1)
    assert int(ov.runner.compiled.get_property("INFERENCE_NUM_THREADS")) == 1
