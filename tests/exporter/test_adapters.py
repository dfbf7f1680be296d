"""Bring your own model, part 1: a `peft` adapter named by the manifest (``"adapter"``).

Models: the REAL all-MiniLM-L6-v2 (sentence-transformers layout) with a LoRA adapter on its attention made by peft
itself; and the REAL MiniLM backbone under a SYNTHETIC seeded classification head, with a LoRA adapter and a
modules_to_save copy of the classifier (tests/helpers/byom.py). The oracle is peft's eager model with the adapter
applied, NOT merged: the build merges it; parity and the tests here compare that merge against peft unmerged.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from helpers import byom, synthetic
from helpers.artifacts import linked_copy
from readout_export.cli import main

pytest.importorskip("peft")

TEXTS = ["The cat sat on the mat.", "Markets rallied after the news.", "a", "naïve café résumé — déjà vu",
         "Left padding changes BERT outputs unless positions come from the mask."]
MANIFEST = {"schema": "readout-export/manifest/1", "output_dir": "artifact",
            "targets": [{"format": "onnx", "precision": "fp32"}]}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    """A short parity corpus (the texts above and one past max_length): the built-in one's 31 items, each run
    eagerly alone, would double these tests' time without reaching anything new."""
    from readout_parity.corpus import LONG

    path = tmp_path_factory.mktemp("corpus") / "texts.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in [*TEXTS, LONG]))
    return path


def _build(root: Path, **fields) -> Path:
    from readout_export.build import build

    (root / "manifest.json").write_text(json.dumps({**MANIFEST, **fields}))
    return build(root / "manifest.json").output_dir


@pytest.fixture(scope="module")
def emb(tmp_path_factory) -> SimpleNamespace:
    """MiniLM (REAL) + a LoRA adapter on query/value, built as an embedding; the adapter named relatively."""
    root = tmp_path_factory.mktemp("adapter-emb")
    model = synthetic.minilm_path()
    adapter = byom.make_lora(model, root / "adapter")
    art = _build(root, model=str(model), adapter="adapter", family="embedding")
    return SimpleNamespace(root=root, model=model, adapter=adapter, art=art)


@pytest.fixture(scope="module")
def cls(tmp_path_factory) -> SimpleNamespace:
    """MiniLM (REAL) under a seeded 3-way head + LoRA and a modules_to_save classifier, built as a classifier."""
    root = tmp_path_factory.mktemp("adapter-cls")
    model = byom.make_minilm_classifier(root / "base")
    adapter = byom.make_lora(model, root / "adapter", "AutoModelForSequenceClassification",
                             modules_to_save=["classifier"])
    art = _build(root, model=str(model), adapter=str(adapter), family="sequence_classification", max_length=64)
    return SimpleNamespace(root=root, model=model, adapter=adapter, art=art)


def _record(art: Path) -> dict:
    return json.loads((art / "readout.json").read_text())["abi"]


def _fields(record: dict) -> dict:
    from readout_sdk.release.identity import layer_fields

    return layer_fields(record, record["identity"]["weights"])


def _mean_pooled(model, texts: list[str], tokenizer_dir: Path, max_length: int) -> np.ndarray:
    """sentence-transformers' readout of all-MiniLM-L6-v2 (mean over attention rows, then L2), one text at a time."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    out = []
    with torch.no_grad():
        for text in texts:
            enc = tok(text, truncation=True, max_length=max_length, return_tensors="pt")
            rows = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                         token_type_ids=enc["token_type_ids"]).last_hidden_state[0]
            v = rows.mean(0)
            out.append((v / v.norm()).numpy())
    return np.stack(out)


# ---- the embedding: build, parity against peft unmerged, the SDK against peft unmerged -----------------------

def test_embedding_parity_passes_against_the_unmerged_peft_reference(emb, corpus, tmp_path):
    report = tmp_path / "parity.json"
    result = CliRunner().invoke(main, ["parity", str(emb.art), "--widths", "1,7", "--corpus", str(corpus),
                                       "--report", str(report)])
    assert result.exit_code == 0, result.output
    checks = json.loads(report.read_text())["checks"]
    gated = [c for c in checks if c["target"] == "onnx-fp32" and c["provider"] == "CPUExecutionProvider"]
    assert {c["metric"] for c in gated} >= {"max_abs_error", "min_cosine"}
    assert all(c["decision"] == "PASS" for c in gated), gated  # gated, not NOT_EVALUATED
    assert all("peft adapter applied unmerged" in c["reference"] for c in gated)
    (recon,) = [c for c in checks if c["target"] == "reconciliation"]
    assert recon["decision"] == "PASS"


def test_the_reference_runs_peft_unmerged_and_the_export_merged(emb):
    from peft import PeftModel
    from readout_sdk.artifact import open_artifact

    from readout_export.reference import reference_graph

    art = open_artifact(emb.art)
    assert isinstance(reference_graph(art).core.model, PeftModel)
    assert not isinstance(reference_graph(art, "merged").core.model, PeftModel)


def test_embedding_sdk_equals_peft_eager_unmerged(emb):
    import readout_sdk
    import transformers

    got = readout_sdk.load(emb.art).embed(TEXTS).vectors
    oracle = _mean_pooled(byom.peft_eager(emb.model, emb.adapter), TEXTS, emb.model, 256)
    assert np.abs(got - oracle).max() < 1e-4
    base = _mean_pooled(transformers.AutoModel.from_pretrained(str(emb.model)).eval(), TEXTS, emb.model, 256)
    assert np.abs(got - base).max() > 1e-2  # the adapter really changes what is exported


def test_the_adapted_embedding_serves_over_http_what_peft_computes(emb):
    """One serving path, as an application reaches it: `serve-http` and the openai client."""
    import openai

    from helpers.http_server import HttpServer

    oracle = _mean_pooled(byom.peft_eager(emb.model, emb.adapter), TEXTS, emb.model, 256)
    with HttpServer([f"tickets={emb.art}"]) as server:
        client = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused")
        got = client.embeddings.create(model="tickets", input=TEXTS)
    assert np.abs(np.array([d.embedding for d in got.data]) - oracle).max() < 1e-4


def test_embedding_identity_keeps_base_and_adapter_apart(emb):
    record = _record(emb.art)
    fields = _fields(record)
    adapter = record["adapter"]
    assert adapter["method"] == "LORA" and adapter["head_sha256"] is None and adapter["form"] == "merged"
    assert fields["contextual"]["adapter_sha256"] == adapter["backbone_sha256"]
    assert fields["contextual"]["backbone_sha256"] == record["identity"]["weights"]["backbone"]  # the base, alone
    assert fields["contextual"]["adapter_config"]["r"] == 4
    assert fields["contextual"]["adapter_config"]["target_modules"] in (["query", "value"], ["value", "query"])
    assert "base_model_name_or_path" not in fields["contextual"]["adapter_config"]
    assert not {k for k in fields["head"] if k.startswith("adapter")}
    source = json.loads((emb.art / "readout.json").read_text())["source"]
    assert source["adapter"]["path"] == str(emb.adapter)
    assert {f["file"] for f in source["adapter"]["files"]} == {"adapter_config.json", "adapter_model.safetensors"}
    assert record["provenance"]["adapter_sha256"] == source["adapter"]["sha256"]


def test_a_plain_record_has_no_adapter_fields_and_the_adapter_changes_the_release(emb, tmp_path):
    """The same manifest without ``adapter``, derived the way reconciliation derives what a build writes: the
    plain record's layer fields are exactly the adapter build's without the adapter keys (nothing added to a
    record without an adapter, so existing artifacts keep their release ids), the base's digest is shared, and
    the release ids differ."""
    from readout_sdk.artifact import open_artifact

    from readout_export.reconcile import derived_record

    copy = linked_copy(emb.art, tmp_path / "plain")
    meta = json.loads((copy / "readout.json").read_text())
    del meta["build"]["manifest"]["adapter"]
    (copy / "readout.json").write_text(json.dumps(meta))
    plain = derived_record(open_artifact(copy), emb.model)
    assert "adapter" not in plain and "adapter_sha256" not in plain["provenance"]
    with_adapter, without = _fields(_record(emb.art)), _fields(plain)
    for layer, own in with_adapter.items():
        assert without[layer] == {k: v for k, v in own.items() if not k.startswith("adapter")}, layer
    assert plain["identity"]["weights"] == _record(emb.art)["identity"]["weights"]
    assert plain["identity"]["layers"]["tokenizer"] == _record(emb.art)["identity"]["layers"]["tokenizer"]
    assert plain["identity"]["layers"]["contextual"] != _record(emb.art)["identity"]["layers"]["contextual"]
    assert plain["identity"]["release_id"] != _record(emb.art)["identity"]["release_id"]


def _moved(art: Path, adapter: Path, dst: Path) -> tuple[Path, Path]:
    """A copy of the artifact whose recorded adapter is a copy of ``adapter`` (which the test may then change)."""
    moved = shutil.copytree(adapter, dst / "adapter")
    copy = linked_copy(art, dst / "art")
    meta = json.loads((copy / "readout.json").read_text())
    meta["source"]["adapter"]["path"] = str(moved)
    (copy / "readout.json").write_text(json.dumps(meta))
    return copy, moved


def test_a_changed_lora_fails_reconciliation_naming_the_contextual_adapter_field(emb, tmp_path):
    from readout_parity import ParityError
    from readout_sdk.artifact import open_artifact

    from readout_export.reconcile import derived_record, reconcile
    from readout_export.reference import check_parity

    copy, moved = _moved(emb.art, emb.adapter, tmp_path)
    assert reconcile(open_artifact(copy)).decision == "PASS"
    byom.edit_adapter_tensors(moved, "lora")
    recon = reconcile(open_artifact(copy))
    assert recon.decision == "FAIL"
    named = {f.name for f in recon.differences}
    assert {"contextual.adapter_sha256", "provenance.adapter_sha256", "identity.release_id"} <= named
    assert "contextual.backbone_sha256" not in named  # the base did not change
    assert any(line.startswith("reconciliation FAIL: contextual.adapter_sha256:") for line in recon.lines())
    derived = derived_record(open_artifact(copy), emb.model)["identity"]["layers"]
    kept = _record(emb.art)["identity"]["layers"]
    assert derived["tokenizer"] == kept["tokenizer"] and derived["contextual"] != kept["contextual"]
    with pytest.raises(ParityError, match="adapter files changed since the build"):  # never compared against it
        check_parity(copy, widths=(1,))


# ---- the classifier: LoRA in the backbone, modules_to_save in the head ---------------------------------------

def test_classifier_parity_passes_and_the_sdk_equals_peft_unmerged(cls, corpus):
    import readout_sdk

    from readout_export.reference import check_parity

    report = check_parity(cls.art, corpus, widths=(7,))
    gated = [c for c in report.checks if c.target == "onnx-fp32" and c.provider == "CPUExecutionProvider"]
    assert {c.metric for c in gated} >= {"max_abs_error", "argmax_agreement"}
    assert all(c.decision == "PASS" for c in gated), gated
    assert report.exit_code() == 0
    engine = readout_sdk.load(cls.art)
    got = np.array([[c.scores[k] for k in byom.SENTIMENT] for c in engine.classify(TEXTS)])
    from transformers import AutoTokenizer

    peft_model = byom.peft_eager(cls.model, cls.adapter, "AutoModelForSequenceClassification")
    tok = AutoTokenizer.from_pretrained(str(cls.model))
    with torch.no_grad():
        logits = np.concatenate([peft_model(**tok(t, truncation=True, max_length=64, return_tensors="pt")).logits
                                 .numpy() for t in TEXTS])
    oracle = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    assert np.abs(got - oracle).max() < 1e-4


def test_classifier_identity_puts_the_head_copy_in_the_head_layer(cls):
    record = _record(cls.art)
    fields = _fields(record)
    assert record["adapter"]["backbone_sha256"] and record["adapter"]["head_sha256"]
    assert fields["contextual"]["adapter_sha256"] == record["adapter"]["backbone_sha256"]
    assert fields["head"]["adapter_sha256"] == record["adapter"]["head_sha256"]
    assert fields["contextual"]["adapter_config"]["modules_to_save"] == ["classifier"]


def test_a_changed_head_copy_invalidates_the_head_only(cls, tmp_path):
    from readout_sdk.artifact import open_artifact

    from readout_export.reconcile import derived_record, reconcile

    copy, moved = _moved(cls.art, cls.adapter, tmp_path)
    byom.edit_adapter_tensors(moved, "head")
    recon = reconcile(open_artifact(copy))
    named = {f.name for f in recon.differences}
    assert recon.decision == "FAIL" and "head.adapter_sha256" in named
    assert not {n for n in named if n.startswith(("contextual.", "tokenizer.", "readout."))}, named
    derived = derived_record(open_artifact(copy), cls.model)["identity"]
    kept = _record(cls.art)["identity"]
    for layer in ("tokenizer", "contextual", "readout"):  # contextual rows and vectors stay reusable
        assert derived["layers"][layer] == kept["layers"][layer]
    assert derived["layers"]["head"] != kept["layers"]["head"] and derived["release_id"] != kept["release_id"]


# ---- refusals: one line, exit 2, the JSON path; validate refuses what build refuses ----------------------------

@pytest.fixture(scope="module")
def tiny_adapter(tmp_path_factory) -> Path:
    """A LoRA adapter peft made for a SYNTHETIC tiny BERT (hidden 32): it does not fit MiniLM (384)."""
    root = tmp_path_factory.mktemp("tiny-adapter")
    tiny = synthetic.make_model("bert", "embedding", root / "tiny")
    return byom.make_lora(tiny, root / "adapter")


def _refused(tmp_path: Path, adapter: str | Path, path: str, words: str, command: str = "validate",
             model: Path | None = None) -> str:
    doc = {"schema": "readout-export/manifest/1", "model": str(model or synthetic.minilm_path()),
           "adapter": str(adapter), "family": "embedding", "output_dir": "out"}
    return byom.refused(tmp_path, doc, path, words, command)


def _edited(src: Path, dst: Path, **config) -> Path:
    shutil.copytree(src, dst)
    doc = json.loads((dst / "adapter_config.json").read_text())
    doc.update(config)
    (dst / "adapter_config.json").write_text(json.dumps(doc))
    return dst


@pytest.mark.parametrize("command", ["validate", "build"])
def test_a_missing_adapter_directory_is_refused(tmp_path, command):
    _refused(tmp_path, tmp_path.parent / "no-such-adapter", "$.adapter", "adapter directory not found", command)


def test_an_adapter_without_its_config_is_refused(tmp_path, tmp_path_factory, emb):
    bare = tmp_path_factory.mktemp("noconfig")
    shutil.copy(emb.adapter / "adapter_model.safetensors", bare)
    _refused(tmp_path, bare, "$.adapter", "no adapter_config.json")


def test_a_method_peft_cannot_merge_is_refused(tmp_path, tmp_path_factory, emb):
    prompt = _edited(emb.adapter, tmp_path_factory.mktemp("prompt") / "a", peft_type="PROMPT_TUNING")
    _refused(tmp_path, prompt, "$.adapter", "PROMPT_TUNING cannot be merged")
    unknown = _edited(emb.adapter, tmp_path_factory.mktemp("unknown") / "a", peft_type="MAGIC")
    _refused(tmp_path, unknown, "$.adapter", "'MAGIC' is not a method peft")


@pytest.mark.parametrize("command", ["validate", "build"])
def test_adapter_tensors_that_do_not_fit_the_base_are_refused(tmp_path, tmp_path_factory, tiny_adapter, command):
    # the recorded base made to agree, so that it is the tensors' shapes that are refused
    moved = _edited(tiny_adapter, tmp_path_factory.mktemp("shapes") / "a",
                    base_model_name_or_path=str(synthetic.minilm_path()))
    msg = _refused(tmp_path, moved, "$.adapter", "has shape", command)
    assert "[4, 32]" in msg and "[4, 384]" in msg


def test_target_modules_the_base_lacks_are_refused(tmp_path, tmp_path_factory, emb):
    moved = _edited(emb.adapter, tmp_path_factory.mktemp("targets") / "a", target_modules=["no_such_layer"])
    _refused(tmp_path, moved, "$.adapter", "peft cannot apply it")


def test_an_adapter_recorded_for_another_local_model_is_refused(tmp_path, tiny_adapter):
    """adapter_config.json names a directory on this machine holding other weights: refused (provably another
    model); a name that cannot be compared is a note (next test)."""
    _refused(tmp_path, tiny_adapter, "$.adapter", "holding other weights than $.model")


def test_an_adapter_recorded_under_another_name_is_a_note(tmp_path, tmp_path_factory, emb):
    moved = _edited(emb.adapter, tmp_path_factory.mktemp("named") / "a",
                    base_model_name_or_path="someone/another-MiniLM")
    doc = {"schema": "readout-export/manifest/1", "model": str(emb.model), "adapter": str(moved),
           "family": "embedding", "output_dir": "out"}
    (tmp_path / "manifest.json").write_text(json.dumps(doc))
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "manifest.json")])
    assert result.exit_code == 0, result.output
    assert "note: the adapter records base 'someone/another-MiniLM'" in result.output


def test_without_peft_the_adapter_is_refused_naming_the_extra(tmp_path, emb, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "peft", None)  # as if not installed: find_spec answers None
    _refused(tmp_path, emb.adapter, "$.adapter", "pip install 'readout-export[adapters]'")
