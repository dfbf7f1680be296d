"""`readout-export triton`: generated model repositories, parsed with Triton's own model-config protobuf
(tritonclient) and checked against the ONNX graph itself (onnxruntime's view of its tensors), then served
by a real tritonserver (the one nvidia-pytriton bundles) and compared with the SDK run directly.

PyTriton's server ships only the Python backend, so for the served test the graph model's backend is
swapped for a Python stand-in running the same model.onnx (tests/helpers/triton_server.py); Triton, the
generated text model, its BLS calls, dynamic batching and the configs' tensors are real.

Models: SYNTHETIC tiny BERT classifier, token tagger and QA model (tests/helpers/synthetic.py)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from click.testing import CliRunner
from google.protobuf import json_format, text_format
from tritonclient.grpc import model_config_pb2

import readout_sdk
from helpers import synthetic
from helpers.artifacts import list_stand_in_engine
from helpers.corpus import PAIRS, TEXTS
from readout_export.cli import main
from readout_sdk.artifact import sha256_file
from readout_sdk.profiles import Profile
from helpers.triton_server import TritonServer, fan_out, infer, stand_in_graph

ORT_TYPES = {"tensor(int64)": "TYPE_INT64", "tensor(float)": "TYPE_FP32"}


def parse(path: Path):
    return text_format.Parse(path.read_text(), model_config_pb2.ModelConfig())


def write(artifact: Path, repo: Path, *extra: str):
    result = CliRunner().invoke(main, ["triton", str(artifact), "--repo", str(repo), *extra])
    return result


@pytest.mark.parametrize("key", ["classify", "tag-bert", "qa", "choice"])
def test_configs_parse_with_tritons_protobuf_and_match_the_graph(shared, tmp_path, key):
    art = shared(key)[1]
    meta = json.loads((art / "readout.json").read_text())
    name = meta["abi"]["name"]
    result = write(art, tmp_path / "repo")
    assert result.exit_code == 0, result.output
    graph_dir, text_dir = tmp_path / "repo" / f"{name}_graph", tmp_path / "repo" / name
    graph, text = parse(graph_dir / "config.pbtxt"), parse(text_dir / "config.pbtxt")

    # the compiled model: byte-identical graph, tensors as the graph itself declares them
    assert graph.platform == "onnxruntime_onnx" and graph.max_batch_size == 64
    fp32 = next(t for t in meta["targets"] if t["format"] == "onnx" and t["precision"] == "fp32")
    assert sha256_file(graph_dir / "1" / "model.onnx") == fp32["sha256"]
    session = ort.InferenceSession(str(graph_dir / "1" / "model.onnx"), providers=["CPUExecutionProvider"])
    for declared, actual in ((graph.input, session.get_inputs()), (graph.output, session.get_outputs())):
        assert [t.name for t in declared] == [t.name for t in actual]
        for t, a in zip(declared, actual):
            assert model_config_pb2.DataType.Name(t.data_type) == ORT_TYPES[a.type]
            assert len(t.dims) == len(a.shape) - 1  # the batch axis is Triton's (max_batch_size > 0)
            for d, s in zip(t.dims, a.shape[1:]):
                assert d == (s if isinstance(s, int) else -1)
    assert graph.HasField("dynamic_batching") and text.HasField("dynamic_batching")

    # both configs carry the ABI record: labels, score type and output meanings travel with the repo
    for cfg in (graph, text):
        assert json.loads(cfg.parameters["readout.abi"].string_value) == meta["abi"]
        assert cfg.parameters["readout.release_id"].string_value == meta["abi"]["identity"]["release_id"]
    assert text.backend == "python" and text.parameters["readout.graph_model"].string_value == f"{name}_graph"
    assert [i.name for i in text.input] == list(readout_sdk.families.get(meta["abi"]["family"]).fields)
    assert all(model_config_pb2.DataType.Name(i.data_type) == "TYPE_STRING" for i in text.input)
    assert [o.name for o in text.output] == ["result"]
    assert "readout_sdk.serving.triton_model import TritonPythonModel" in (text_dir / "1" / "model.py").read_text()
    readout = text_dir / "1" / "readout"
    assert sorted(p.name for p in readout.iterdir()) == ["readout.json", "tokenizer.json"]
    assert not list((tmp_path / "repo").glob(".*"))  # no staging directories left behind


def test_existing_models_refused_unless_forced_and_bad_targets_named(shared, tmp_path):
    art, other = shared("classify")[1], shared("tag-bert")[1]
    repo = tmp_path / "repo"
    assert write(art, repo, "--name", "m").exit_code == 0
    again = write(other, repo, "--name", "m")
    assert again.exit_code == 2 and "exists; pass --force" in again.output
    assert parse(repo / "m" / "config.pbtxt").parameters["readout.abi"].string_value == json.dumps(
        json.loads((art / "readout.json").read_text())["abi"], sort_keys=True)  # untouched by the refusal
    assert write(other, repo, "--name", "m", "--force").exit_code == 0  # both models replaced together
    tagger_abi = json.loads((other / "readout.json").read_text())["abi"]
    for model in ("m", "m_graph"):
        assert json.loads(parse(repo / model / "config.pbtxt").parameters["readout.abi"].string_value) == tagger_abi
    assert sorted(p.name for p in repo.iterdir()) == ["m", "m_graph"]
    assert not list(tmp_path.glob(".repo.staging-*"))  # staging lives beside the repository and is removed
    assert oct((repo / "m" / "1" / "model.py").stat().st_mode & 0o777) == "0o644"
    assert oct((repo / "m_graph").stat().st_mode & 0o777) == "0o755"
    missing = write(art, tmp_path / "r2", "--target", "onnx-int8")
    assert missing.exit_code == 2 and "no target 'onnx-int8'" in missing.output and "onnx-fp32" in missing.output
    bad_name = write(art, tmp_path / "r3", "--name", "a/b")
    assert bad_name.exit_code == 2 and "--name 'a/b'" in bad_name.output
    assert write(art, tmp_path / "r4", "--max-batch-size", "0").exit_code == 2


def test_tensorrt_engine_becomes_a_plan_model_with_its_profile(build_artifact, tmp_path):
    model = synthetic.make_model("bert", "sequence_classification", tmp_path / "m", labels=["a", "b"])
    art = build_artifact({"model": str(model), "family": "sequence_classification", "targets": [
        {"format": "onnx", "precision": "fp32"}, {"format": "onnx", "precision": "bf16"},
        {"format": "tensorrt", "precision": "fp16", "profile": {"batch": [1, 16, 48]}}]})
    uncompiled = write(art, tmp_path / "r0", "--target", "tensorrt-fp16")
    assert uncompiled.exit_code == 2 and "not compiled yet" in uncompiled.output and "readout-export compile" in uncompiled.output
    bf16 = write(art, tmp_path / "r1", "--target", "onnx-bf16")
    assert bf16.exit_code == 2 and "not on Triton's ONNX Runtime backend" in bf16.output

    plan = b"stand-in plan bytes"
    list_stand_in_engine(art, Profile((1, 16, 48), (1, 128, 128)), plan)
    result = write(art, tmp_path / "repo", "--target", "tensorrt-fp16")
    assert result.exit_code == 0, result.output
    name = json.loads((art / "readout.json").read_text())["abi"]["name"]
    graph = parse(tmp_path / "repo" / f"{name}_graph" / "config.pbtxt")
    assert graph.platform == "tensorrt_plan" and graph.max_batch_size == 48
    assert list(graph.dynamic_batching.preferred_batch_size) == [16]
    assert (tmp_path / "repo" / f"{name}_graph" / "1" / "model.plan").read_bytes() == plan
    text = parse(tmp_path / "repo" / name / "config.pbtxt")
    assert text.parameters["readout.target"].string_value == "tensorrt-fp16"
    assert text.parameters["readout.batch_size"].string_value == "32"
    too_big = write(art, tmp_path / "r3", "--target", "tensorrt-fp16", "--max-batch-size", "64")
    assert too_big.exit_code == 2 and "within the engine's profile" in too_big.output


@pytest.mark.heavy
def test_generated_repository_serves_text_on_real_triton(shared, tmp_path):
    repo = tmp_path / "repo"
    names = {}
    for key in ("classify", "tag-bert", "qa"):
        art = shared(key)[1]
        assert write(art, repo, "--name", key).exit_code == 0
        stand_in_graph(repo / f"{key}_graph")
        names[key] = readout_sdk.load(art, target="onnx-fp32")
    for key in ("cross", "choice", "roles"):
        assert write(shared(key)[1], repo, "--name", key).exit_code == 0
        stand_in_graph(repo / f"{key}_graph")
        names[key] = readout_sdk.load(shared(key)[1], target="onnx-fp32")
    texts = TEXTS * 3
    with TritonServer(repo, tmp_path / "server") as server:
        def client(i: int) -> list[dict]:  # several clients at once, alternating HTTP and gRPC
            protocol = "http" if i % 2 else "grpc"
            return infer(server.http_url if i % 2 else server.grpc_url, "classify", {"text": texts[i::4]}, protocol)

        got = fan_out(client, 4)
        assert not [o for o in got.values() if isinstance(o, Exception)], got
        engine = names["classify"]
        for i, records in got.items():
            expected = engine.classify(texts[i::4])
            assert len(records) == len(expected)
            for rec, exp in zip(records, expected):  # in order, the SDK's decision and probabilities
                assert rec["label"] == exp.label and rec["truncated"] == exp.truncated
                assert rec["scores"] == pytest.approx(exp.scores, abs=1e-6)

        tagged = infer(server.http_url, "tag-bert", {"text": TEXTS})
        for rec, exp in zip(tagged, names["tag-bert"].tag(TEXTS)):
            assert [(e["label"], e["start"], e["end"], e["text"]) for e in rec["entities"]] == [
                (e.label, e.start, e.end, e.text) for e in exp.entities]

        questions, contexts = zip(*PAIRS)
        answers = infer(server.grpc_url, "qa", {"question": list(questions), "context": list(contexts)}, "grpc")
        for rec, (q, c) in zip(answers, PAIRS):
            exp = names["qa"].answer(q, c)
            assert (rec["answer"], rec["start"], rec["end"]) == (exp.text, exp.start, exp.end)
            assert rec["score"] == pytest.approx(exp.score, rel=1e-5)

        # an asymmetric model: each row's role (or the default) prepended and its prompt rows not pooled
        roles = ["query", "document"] * 2
        mixed = infer(server.http_url, "roles", {"text": TEXTS[:4], "role": roles})
        for rec, text, role in zip(mixed, TEXTS, roles):
            assert rec["role"] == role
            assert rec["embedding"] == pytest.approx(names["roles"].embed([text], role=role).vectors[0], abs=1e-6)
        default = infer(server.grpc_url, "roles", {"text": TEXTS[:2]}, "grpc")
        assert [r["role"] for r in default] == ["query", "query"]
        assert default[1]["embedding"] == pytest.approx(names["roles"].embed(TEXTS[1:2]).vectors[0], abs=1e-6)

        q, d = zip(*PAIRS)
        scored = infer(server.grpc_url, "cross", {"query": list(q), "document": list(d)}, "grpc")
        assert [r["score"] for r in scored] == pytest.approx([e.score for e in names["cross"].score_pairs(PAIRS)],
                                                             abs=1e-6)
        options = ["a cat on a mat", "the capital of France", "an unrelated choice"]
        chosen = infer(server.http_url, "choice", {"question": ["Where is Paris?"],
                                                          "choices": [json.dumps(options)]})
        exp = names["choice"].choose("Where is Paris?", options)  # (batch, choices, sequence) through BLS
        assert (chosen[0]["index"], chosen[0]["scores"]) == (exp.index, pytest.approx(list(exp.scores), abs=1e-6))

        # a request the SDK refuses fails alone, with the SDK's message, while requests batched with it succeed
        outcomes = fan_out(lambda i: infer(server.http_url, "classify",
                                           {"text": ["fine", "   "] if i % 3 == 0 else ["fine"]}), 9)
        for i, outcome in outcomes.items():
            if i % 3 == 0:
                assert isinstance(outcome, Exception) and "no content tokens" in str(outcome)
            else:
                assert outcome[0]["label"] == engine.classify(["fine"])[0].label


def test_text_model_refuses_a_foreign_graph_and_checks_the_profile(shared, tmp_path, monkeypatch):
    """The generated Python model's own checks, run outside Triton with a stand-in for its utility module."""
    import sys
    import types

    from readout_sdk.errors import InputRefused
    from readout_sdk.serving.triton_model import BlsRunner, TritonPythonModel

    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", types.SimpleNamespace())
    repo = tmp_path / "repo"
    assert write(shared("classify")[1], repo, "--name", "m").exit_code == 0
    config = json_format.MessageToJson(parse(repo / "m" / "config.pbtxt"), preserving_proto_field_name=True)
    args = {"model_config": config, "model_repository": str(repo / "m"), "model_version": "1"}  # as Triton passes them
    model = TritonPythonModel()
    model.initialize(args)
    assert model.engine.family == "sequence_classification" and model.batch_size == 32
    assert write(shared("tag-bert")[1], repo, "--name", "other").exit_code == 0
    (repo / "m_graph" / "config.pbtxt").write_text((repo / "other_graph" / "config.pbtxt").read_text())
    with pytest.raises(readout_sdk.ArtifactError, match="carries another ABI record"):
        TritonPythonModel().initialize(args)
    runner = BlsRunner("g", None, Profile((1, 8, 16), (1, 32, 64)))
    with pytest.raises(InputRefused, match="sequence 80 is outside this engine's optimization profile"):
        runner.run(["logits"], {"input_ids": np.zeros((2, 80), np.int64)})
