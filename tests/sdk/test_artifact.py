"""The artifact as a file set: ABI record in the graph, hashes, tamper refusal, atomic writes,
--force, zero-row refusal, and the CLI's promises. Model: SYNTHETIC tiny BERT."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

from helpers import synthetic
from helpers.client import GraphClient
from readout_export.cli import main
from readout_export.errors import BuildError
from readout_sdk.artifact import ArtifactError, open_artifact


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """One artifact (content-row mean + first_valid over a tiny BERT), built through the CLI."""
    root = tmp_path_factory.mktemp("artifact")
    model = synthetic.make_model("bert", "embedding", root / "model")
    manifest = {"schema": "readout-export/manifest/1", "model": "model", "family": "embedding",
                "output_dir": "dist/tiny", "readout": {"pooling": ["mean", "first_valid"], "rows": "content"},
                "name": "tiny-bert"}
    (root / "manifest.json").write_text(json.dumps(manifest))
    result = CliRunner().invoke(main, ["build", str(root / "manifest.json"), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["ok"] and summary["family"] == "embedding"
    assert model.is_dir()
    return root / "dist" / "tiny"


@pytest.fixture
def copy(built, tmp_path) -> Path:
    dest = tmp_path / "copy"
    shutil.copytree(built, dest)
    return dest


def test_artifact_layout(built):
    names = {p.name for p in built.iterdir()}
    assert {"readout.json", "tokenizer.json", "model.onnx-fp32.onnx", "build.log"} <= names
    meta = json.loads((built / "readout.json").read_text())
    assert set(meta) >= {"abi", "targets", "tokenizer", "source"}
    assert meta["targets"][0] == {**meta["targets"][0], "format": "onnx", "precision": "fp32"}
    assert len(meta["source"]["weights_sha256"]) == 64
    assert not [p for p in built.parent.iterdir() if p.name.startswith(".")], "staging left behind"


def test_record_in_graph_metadata_and_axes(built):
    model = onnx.load(str(built / "model.onnx-fp32.onnx"))
    props = {p.key: p.value for p in model.metadata_props}
    record = json.loads(props["readout.abi"])
    assert record == json.loads((built / "readout.json").read_text())["abi"]
    assert record["abi_version"] == "readout-abi/1"
    assert record["readout"]["pooling"] == ["mean", "first_valid"] and record["readout"]["rows"] == "content"
    assert record["output"]["dim"] == 64
    dims = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
            for v in list(model.graph.input) + list(model.graph.output)}
    assert dims["input_ids"] == ["batch", "sequence"] and dims["attention_mask"] == ["batch", "sequence"]
    assert dims["token_type_ids"] == ["batch", "sequence"]  # BERT has a learned segment embedding
    assert dims["embeddings"] == ["batch", 64]


def test_open_artifact_verifies(built):
    art = open_artifact(built)
    assert art.family == "embedding" and art.record["name"] == "tiny-bert"


def test_tampered_graph_is_refused(copy):
    path = copy / "model.onnx-fp32.onnx"
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match="model.onnx-fp32.onnx: sha256 .* does not match"):
        open_artifact(copy)
    result = CliRunner().invoke(main, ["inspect", str(copy)])
    assert result.exit_code == 2 and "model.onnx-fp32.onnx" in result.stderr


def test_tampered_tokenizer_is_refused(copy):
    path = copy / "tokenizer.json"
    path.write_text(path.read_text().replace('"[UNK]"', '"[UNKNOWN]"', 1))
    with pytest.raises(ArtifactError, match="tokenizer.json: sha256"):
        open_artifact(copy)


def test_unknown_abi_version_is_refused(copy):
    meta = json.loads((copy / "readout.json").read_text())
    meta["abi"]["abi_version"] = "readout-abi/2"
    (copy / "readout.json").write_text(json.dumps(meta))
    with pytest.raises(ArtifactError, match="readout-abi/2.*readout-abi/1"):
        open_artifact(copy)


def test_record_edited_beside_the_graph_is_refused(copy):
    meta = json.loads((copy / "readout.json").read_text())
    meta["abi"]["readout"]["rows"] = "attention"  # claims another readout than the graph computes
    (copy / "readout.json").write_text(json.dumps(meta))
    with pytest.raises(ArtifactError, match="identity.layers.readout does not match"):  # its digest says so first
        open_artifact(copy)
    meta["abi"]["readout"]["rows"] = "content"
    meta["abi"]["name"] = "another"  # outside the identity: the graph's embedded record still tells
    (copy / "readout.json").write_text(json.dumps(meta))
    with pytest.raises(ArtifactError, match="differs from readout.json"):
        open_artifact(copy)


def test_zero_row_pool_is_nan_never_a_vector(built):
    """An input with no content rows ([CLS] [SEP] only) must not come back as a finite vector."""
    client = GraphClient(built / "model.onnx-fp32.onnx")
    for side in ("left", "right"):
        empty, normal = client.run(["", "a real sentence"], side, 2)
        assert np.isnan(empty["embeddings"]).all()
        assert np.isfinite(normal["embeddings"]).all()


def test_inspect_summary_and_json(built):
    result = CliRunner().invoke(main, ["inspect", str(built)])
    assert result.exit_code == 0, result.output
    for words in ("readout-abi/1", "embedding", "pooling mean+first_valid", "rows content", "embeddings float32",
                  "NOT_EVALUATED"):
        assert words in result.stdout
    result = CliRunner().invoke(main, ["inspect", str(built), "--json"])
    doc = json.loads(result.stdout)
    assert doc["abi"] == json.loads((built / "readout.json").read_text())["abi"]


def test_existing_artifact_needs_force(built):
    manifest = built.parent.parent / "manifest.json"
    before = (built / "readout.json").read_text()
    result = CliRunner().invoke(main, ["build", str(manifest)])
    assert result.exit_code == 2 and "--force" in result.stderr
    assert (built / "readout.json").read_text() == before


def test_failed_build_leaves_nothing_and_keeps_the_old_artifact(built, monkeypatch, tmp_path):
    import readout_export.graph.onnx_export as onnx_export

    def boom(*args, **kwargs):
        raise BuildError("simulated failure halfway through the export")

    monkeypatch.setattr(onnx_export, "export_onnx", boom)
    manifest = built.parent.parent / "manifest.json"
    before = {p.name: p.read_bytes() for p in built.iterdir()}
    result = CliRunner().invoke(main, ["build", str(manifest), "--force"])
    assert result.exit_code == 1 and "simulated failure" in result.stderr
    assert "Traceback" not in result.output
    assert {p.name: p.read_bytes() for p in built.iterdir()} == before
    assert not [p for p in built.parent.iterdir() if p.name.startswith(".")]
    # a fresh destination: nothing at all appears
    doc = json.loads(manifest.read_text())
    doc["output_dir"] = str(tmp_path / "fresh")
    doc["model"] = str(manifest.parent / "model")
    (tmp_path / "m.json").write_text(json.dumps(doc))
    result = CliRunner().invoke(main, ["build", str(tmp_path / "m.json"), "--debug"])
    assert result.exit_code == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json"]


def test_force_replaces_only_artifacts(tmp_path, built):
    manifest = json.loads((built.parent.parent / "manifest.json").read_text())
    manifest["model"] = str(built.parent.parent / "model")
    manifest["output_dir"] = str(tmp_path / "precious")
    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "notes.txt").write_text("not an artifact")
    (tmp_path / "m.json").write_text(json.dumps(manifest))
    result = CliRunner().invoke(main, ["build", str(tmp_path / "m.json"), "--force"])
    assert result.exit_code == 2 and "not an artifact" in result.stderr
    assert (tmp_path / "precious" / "notes.txt").read_text() == "not an artifact"


@pytest.mark.parametrize("intruder", ["bare_readout_json", "user_file", "user_dir", "set_aside_report"])
def test_force_replaces_a_directory_only_when_this_tool_wrote_everything_in_it(tmp_path, built, intruder):
    """--force is positive identification: a readable artifact readout.json and nothing it does not
    account for. A folder that merely contains some readout.json, or an artifact a user put a file in,
    is refused (exit 2, one line naming what would be lost) and left byte for byte as it was."""
    manifest = json.loads((built.parent.parent / "manifest.json").read_text())
    manifest["model"] = str(built.parent.parent / "model")
    out = tmp_path / "out"
    manifest["output_dir"] = str(out)
    (tmp_path / "m.json").write_text(json.dumps(manifest))
    if intruder == "bare_readout_json":
        out.mkdir()
        (out / "readout.json").write_text('{"mine": 1}')
        (out / "precious.txt").write_text("keep me")
    else:
        shutil.copytree(built, out)
        if intruder == "user_file":
            (out / "precious.txt").write_text("keep me")
        elif intruder == "user_dir":
            (out / "notes").mkdir()
            (out / "notes" / "precious.txt").write_text("keep me")
        else:  # what lifecycle.keep set aside: a user's edited report, kept
            (out / "evaluation.json.ignored-20261205T000000000000Z").write_text("keep me")
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    for command in (["validate", str(tmp_path / "m.json")], ["build", str(tmp_path / "m.json"), "--force"]):
        result = CliRunner().invoke(main, command)
        assert result.exit_code == 2, result.output
        assert result.stderr.count("error:") == 1 and ("not an artifact" in result.stderr
                                                       or "move them out first" in result.stderr)
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    if intruder != "bare_readout_json":  # with the intruder gone, --force replaces the artifact
        for p in sorted(out.iterdir()):
            if p.name not in {q.name for q in built.iterdir()}:
                shutil.rmtree(p) if p.is_dir() else p.unlink()
        assert CliRunner().invoke(main, ["build", str(tmp_path / "m.json"), "--force"]).exit_code == 0


def test_a_new_top_level_output_dir_is_refused(tmp_path, built):
    """A destination directly under / (for instance where a dangling link's target resolves) is never made."""
    manifest = json.loads((built.parent.parent / "manifest.json").read_text())
    manifest["model"] = str(built.parent.parent / "model")
    manifest["output_dir"] = "/readout-export-test-never-made"
    (tmp_path / "m.json").write_text(json.dumps(manifest))
    result = CliRunner().invoke(main, ["build", str(tmp_path / "m.json")])
    assert result.exit_code == 2 and "top-level directory" in result.stderr
    assert not Path("/readout-export-test-never-made").exists()


@pytest.mark.parametrize("command", [[], ["build"], ["validate"], ["inspect"]])
def test_every_command_has_help(command):
    result = CliRunner().invoke(main, command + ["--help"])
    assert result.exit_code == 0 and "Usage:" in result.output


def test_usage_error_exits_2():
    result = CliRunner().invoke(main, ["build"])
    assert result.exit_code == 2


def test_thin_sdk_reads_artifacts_without_torch(built):
    """readout_sdk verifies an artifact without importing torch or transformers (even where installed)."""
    import subprocess
    import sys

    code = ("import sys, readout_sdk; a = readout_sdk.open_artifact(sys.argv[1]); "
            "heavy = [m for m in ('torch', 'transformers', 'onnx') if m in sys.modules]; "
            "assert not heavy, heavy; print(a.family)")
    done = subprocess.run([sys.executable, "-c", code, str(built)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "embedding"


# ---- an artifact is a closed set of files (issue 15) ------------------------------------------------
def _meta(art: Path) -> dict:
    return json.loads((art / "readout.json").read_text())


def _write(art: Path, meta: dict) -> None:
    (art / "readout.json").write_text(json.dumps(meta))


def _sha(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def _refused(art: Path, words: str) -> str:
    """open_artifact, load and inspect all refuse it with one ArtifactError / exit-2 line."""
    import readout_sdk

    with pytest.raises(ArtifactError, match=words):
        open_artifact(art)
    with pytest.raises(ArtifactError, match=words):
        readout_sdk.load(art)
    result = CliRunner().invoke(main, ["inspect", str(art)])
    message = result.stderr.strip()
    assert result.exit_code == 2 and message.count("\n") == 0 and message.startswith("error: "), result.output
    return message


def test_the_tokenizer_the_record_names_is_the_tokenizer_that_is_hashed(copy):
    meta = _meta(copy)
    (copy / "other.json").write_text("{}")
    meta["tokenizer"] = {"file": "other.json", "sha256": _sha(copy / "other.json")}
    _write(copy, meta)
    _refused(copy, "is not the one the ABI record names")


@pytest.mark.parametrize("name", ["/etc/hostname", "../outside.onnx", "sub/model.onnx", ".hidden.onnx"])
def test_target_files_are_plain_names_inside_the_artifact(copy, name):
    meta = _meta(copy)
    outside = copy.parent / "outside.onnx"
    shutil.copyfile(copy / meta["targets"][0]["file"], outside)
    meta["targets"][0]["file"] = name  # even with a sha256 that matches what it points at
    meta["targets"][0]["sha256"] = _sha(outside)
    _write(copy, meta)
    _refused(copy, r"\$\.targets\[0\]\.file")


def test_a_link_out_of_the_artifact_is_refused(copy):
    meta = _meta(copy)
    graph = meta["targets"][0]["file"]
    outside = copy.parent / "outside.onnx"
    shutil.move(copy / graph, outside)
    (copy / graph).symlink_to(outside)
    _refused(copy, "outside the artifact")


@pytest.mark.parametrize("field, value", [("precision", "fp64"), ("format", "bogus"), ("runtime", "bogus"),
                                          ("sha256", "XYZ"), ("file", 7)])
def test_target_fields_are_validated_by_the_schema(copy, field, value):
    meta = _meta(copy)
    meta["targets"][0][field] = value
    _write(copy, meta)
    _refused(copy, rf"readout.json \$\.targets\[0\]\.{field}")


def test_a_target_whose_precision_no_runtime_prepares_is_refused(copy):
    meta = _meta(copy)
    meta["targets"][0]["runtime"] = "openvino"  # an fp32 graph "prepared for" OpenVINO is no target
    _write(copy, meta)
    _refused(copy, r"\$\.targets\[0\]: no onnx target is fp32 prepared for openvino")


@pytest.mark.parametrize("raw, words", [(b"\xff\xfe{}", "not UTF-8"), (b'{"abi": NaN}', "not valid JSON"),
                                        (b"[" * 5000 + b"]" * 5000, "nested too deeply"),
                                        (b'{"abi": {}, "targets": [], "tokenizer": {}, "extra": 1}', r"readout.json \$")])
def test_a_damaged_readout_json_is_one_artifact_error(copy, raw, words):
    (copy / "readout.json").write_bytes(raw)
    _refused(copy, words)


def test_a_graph_readout_json_vouches_for_but_no_runtime_reads_is_an_artifact_error(copy):
    meta = _meta(copy)
    graph = copy / meta["targets"][0]["file"]
    graph.write_bytes(graph.read_bytes()[:5000])  # cut, with its new sha256 listed
    meta["targets"][0]["sha256"] = _sha(graph)
    _write(copy, meta)
    _refused(copy, r"model.onnx-fp32.onnx: (not a readable ONNX graph|onnxruntime cannot load it)")


def test_unlisted_files_and_edited_reports_are_ignored_and_reported(copy):
    import readout_sdk
    from readout_sdk.release.lifecycle import keep

    keep(copy, "parity", {"release_id": _meta(copy)["abi"]["identity"]["release_id"], "checks": []},
         {"summary": "0 passed, 0 failed, 0 not evaluated (see parity.json)"})
    (copy / "notes.txt").write_text("mine")
    shown = CliRunner().invoke(main, ["inspect", str(copy)]).stdout
    assert "ignored    notes.txt: not listed in readout.json" in shown and "parity.json" not in shown.split("ignored")[-1]
    (copy / "parity.json").write_text(json.dumps({"forged": True}))
    result = CliRunner().invoke(main, ["inspect", str(copy), "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["ignored"] == {"notes.txt": "not listed in readout.json: ignored",
                                                     "parity.json": "changed after readout.json listed it: ignored, not evidence"}
    assert "parity.json is changed after readout.json listed it" in " ".join(readout_sdk.release.lifecycle.derive(open_artifact(copy)).missing)


def test_load_reads_only_the_graph_it_runs_and_refuses_it_tampered(copy):
    """`load` hashes the graph it runs, not every listed one (a large unused target costs nothing at start),
    yet fails closed on that graph; `open_artifact` (inspect, verify) still hashes every listed file."""
    import readout_sdk
    from readout_sdk.artifact import sha256_file

    fp32 = copy / "model.onnx-fp32.onnx"
    other = copy / "model.onnx-int8.onnx"
    shutil.copyfile(fp32, other)  # a second listed graph (the same bytes: a valid graph with the same record)
    meta = json.loads((copy / "readout.json").read_text())
    meta["targets"].append({**meta["targets"][0], "precision": "int8", "file": other.name, "sha256": sha256_file(other)})
    (copy / "readout.json").write_text(json.dumps(meta))
    assert readout_sdk.load(copy, target="onnx-int8").target.name == "onnx-int8"
    data = bytearray(other.read_bytes())
    data[-10] ^= 0xFF
    other.write_bytes(bytes(data))
    engine = readout_sdk.load(copy, device="cpu")  # the fp32 target: the tampered int8 file is not read
    assert engine.target.name == "onnx-fp32" and engine.embed(["a text"]).vectors.shape == (1, 64)
    with pytest.raises(ArtifactError, match="model.onnx-int8.onnx: sha256 .* does not match"):
        readout_sdk.load(copy, target="onnx-int8")
    with pytest.raises(ArtifactError, match="model.onnx-int8.onnx: sha256 .* does not match"):
        open_artifact(copy)
    other.unlink()  # a listed graph that is missing is refused at open, whichever target runs
    with pytest.raises(ArtifactError, match="model.onnx-int8.onnx: listed in readout.json but missing"):
        readout_sdk.load(copy, device="cpu")
    data = bytearray(fp32.read_bytes())
    data[-10] ^= 0xFF
    fp32.write_bytes(bytes(data))
    shutil.copyfile(fp32, other)
    meta["targets"][1]["sha256"] = sha256_file(other)
    (copy / "readout.json").write_text(json.dumps(meta))
    with pytest.raises(ArtifactError, match="model.onnx-fp32.onnx: sha256 .* does not match"):
        readout_sdk.load(copy, target="onnx-fp32")
