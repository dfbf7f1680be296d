"""Bring your own model, part 2: an architecture that ships its own code (config.json ``auto_map``), opt-in only.

Model: a tiny SYNTHETIC BERT whose configuration_tiny.py / modeling_tiny.py are written into the model directory at
test time (model_type "tiny-remote"; its forward scales the contextual rows, so it is not plain BERT), with the REAL
all-MiniLM-L6-v2 WordPiece tokenizer (tests/helpers/byom.py). The oracle is that code itself, run eagerly by
transformers (AutoModel.from_pretrained(..., trust_remote_code=True)).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from helpers import byom
from helpers.artifacts import linked_copy

TEXTS = ["The cat sat on the mat.", "Markets rallied after the news.", "a", "hello 🤗 world"]
MAX_LENGTH = 64
CLASSES = "configuration_tiny.TinyConfig, modeling_tiny.TinyModel"


def _manifest(model: Path, **fields) -> dict:
    return {"schema": "readout-export/manifest/1", "model": str(model), "family": "embedding",
            "readout": {"pooling": "mean"}, "max_length": MAX_LENGTH, "output_dir": "artifact",
            "targets": [{"format": "onnx", "precision": "fp32"}], **fields}


@pytest.fixture(scope="module")
def remote(tmp_path_factory) -> SimpleNamespace:
    from readout_export.build import build

    root = tmp_path_factory.mktemp("remote-code")
    model = byom.make_remote_code_model(root / "tiny")
    (root / "manifest.json").write_text(json.dumps(_manifest(model, trust_remote_code=True)))
    return SimpleNamespace(root=root, model=model, art=build(root / "manifest.json").output_dir)


def _refused(tmp_path: Path, doc: dict, path: str, words: str, command: str = "validate") -> str:
    return byom.refused(tmp_path, dict(doc, output_dir="out"), path, words, command)


def _remote_eager(model: Path, texts: list[str]) -> np.ndarray:
    """The model's own code, run by transformers: mean over the attention rows, one text at a time."""
    import transformers

    net = transformers.AutoModel.from_pretrained(str(model), trust_remote_code=True, local_files_only=True).eval()
    assert type(net).__name__ == "TinyModel" and type(net).__module__.startswith("transformers_modules.")
    tok = transformers.AutoTokenizer.from_pretrained(str(model))
    out = []
    with torch.no_grad():
        for text in texts:
            enc = tok(text, truncation=True, max_length=MAX_LENGTH, return_tensors="pt")
            out.append(net(**enc).last_hidden_state[0].mean(0).numpy())
    return np.stack(out)


@pytest.mark.parametrize("command", ["validate", "build"])
def test_without_the_opt_in_the_code_is_refused_naming_its_classes(tmp_path, remote, command):
    msg = _refused(tmp_path, _manifest(remote.model), "$.trust_remote_code", f"({CLASSES})", command)
    assert 'set "trust_remote_code": true to run it' in msg and "auto_map" in msg
    _refused(tmp_path, _manifest(remote.model, trust_remote_code=False), "$.trust_remote_code", CLASSES, command)


def _with_auto_map(remote: SimpleNamespace, dst: Path, **entries: str) -> Path:
    model = byom.copy_model(remote.model, dst)
    doc = json.loads((model / "config.json").read_text())
    doc["auto_map"].update(entries)
    (model / "config.json").write_text(json.dumps(doc))
    return model


def test_code_in_another_repository_is_refused(tmp_path, tmp_path_factory, remote):
    model = _with_auto_map(remote, tmp_path_factory.mktemp("elsewhere") / "m", AutoModel="x/y--modeling.Cls")
    _refused(tmp_path, _manifest(model, trust_remote_code=True), "$.trust_remote_code",
             "code in another repository (x/y)")


def test_a_module_missing_from_the_directory_is_refused(tmp_path, tmp_path_factory, remote):
    model = _with_auto_map(remote, tmp_path_factory.mktemp("missing") / "m", AutoModel="modeling_gone.TinyModel")
    _refused(tmp_path, _manifest(model, trust_remote_code=True), "$.trust_remote_code",
             "modeling_gone.py is not in")


def test_a_family_whose_class_the_code_does_not_provide_is_refused(tmp_path, remote):
    doc = _manifest(remote.model, trust_remote_code=True, family="sequence_classification")
    del doc["readout"]
    _refused(tmp_path, doc, "$.family", "auto_map has no AutoModelForSequenceClassification")


def test_the_graph_and_the_sdk_equal_the_code_run_eagerly(remote):
    import readout_sdk
    import transformers

    got = readout_sdk.load(remote.art).embed(TEXTS).vectors
    oracle = _remote_eager(remote.model, TEXTS)
    assert np.abs(got - oracle).max() < 1e-4
    plain = transformers.BertModel.from_pretrained(str(remote.model)).eval()  # the same weights without the code
    tok = transformers.AutoTokenizer.from_pretrained(str(remote.model))
    with torch.no_grad():
        bert = np.stack([plain(**tok(t, return_tensors="pt")).last_hidden_state[0].mean(0).numpy() for t in TEXTS])
    assert np.abs(got - bert).max() > 1e-2  # the code's own twist is in the graph


def test_the_code_model_serves_over_http_what_the_code_computes(remote):
    """One serving path: `serve-http`'s text-embeddings-inference route (unnormalized: the record says so)."""
    import httpx

    from helpers.http_server import HttpServer

    with HttpServer([f"tiny={remote.art}"]) as server:
        reply = httpx.post(f"{server.url}/embed", json={"inputs": TEXTS, "normalize": False}, timeout=60)
    assert reply.status_code == 200, reply.text
    assert np.abs(np.array(reply.json()) - _remote_eager(remote.model, TEXTS)).max() < 1e-4


def test_parity_passes_against_the_code_run_eagerly(remote):
    from readout_export.reference import check_parity

    report = check_parity(remote.art, widths=(1, 7))
    gated = [c for c in report.checks if c.target == "onnx-fp32" and c.provider == "CPUExecutionProvider"]
    assert gated and all(c.decision == "PASS" for c in gated), gated
    assert report.exit_code() == 0


def test_the_code_hashes_are_in_the_contextual_layer(remote):
    from readout_sdk.artifact import sha256_file
    from readout_sdk.release.identity import layer_fields

    meta = json.loads((remote.art / "readout.json").read_text())
    record = meta["abi"]
    fields = layer_fields(record, record["identity"]["weights"])
    files = {"configuration_tiny.py": sha256_file(remote.model / "configuration_tiny.py"),
             "modeling_tiny.py": sha256_file(remote.model / "modeling_tiny.py")}
    assert fields["contextual"]["code_sha256"] == files
    assert fields["contextual"]["code_auto_map"]["AutoModel"] == "modeling_tiny.TinyModel"
    assert record["contextual_state"]["architecture"] == "TinyModel"
    assert record["contextual_state"]["model_type"] == "tiny-remote"
    assert {f["file"]: f["sha256"] for f in meta["source"]["code"]} == files
    assert not {k for k in fields["contextual"] if k.startswith("adapter")}


def test_changed_code_fails_reconciliation_naming_the_code_field(remote, tmp_path):
    from readout_parity import ParityError
    from readout_sdk.artifact import open_artifact

    from readout_export.reconcile import reconcile
    from readout_export.reference import check_parity

    model = byom.copy_model(remote.model, tmp_path / "tiny")
    copy = linked_copy(remote.art, tmp_path / "art")
    meta = json.loads((copy / "readout.json").read_text())
    meta["source"]["model"] = str(model)
    (copy / "readout.json").write_text(json.dumps(meta))
    assert reconcile(open_artifact(copy)).decision == "PASS"
    byom.edit_modeling(model)
    recon = reconcile(open_artifact(copy))
    named = {f.name for f in recon.differences}
    assert recon.decision == "FAIL" and {"contextual.code_sha256", "identity.release_id"} <= named, named
    assert "contextual.backbone_sha256" not in named
    assert any(line.startswith("reconciliation FAIL: contextual.code_sha256:") for line in recon.lines())
    with pytest.raises(ParityError, match="source code changed since the build"):
        check_parity(copy, widths=(1,))


def test_the_opt_in_without_code_changes_nothing(tmp_path_factory):
    """trust_remote_code on a model without auto_map: a note, and a record without code fields."""
    from readout_export.build import validate

    from helpers import synthetic

    root = tmp_path_factory.mktemp("plain-trust")
    model = synthetic.make_model("bert", "embedding", root / "m")
    (root / "manifest.json").write_text(json.dumps(_manifest(model, trust_remote_code=True)))
    plan = validate(root / "manifest.json")
    assert plan.remote is None and any("no auto_map" in n for n in plan.notes)
    shutil.rmtree(root)
