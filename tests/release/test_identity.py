"""Release identity: layered digests, `readout-export diff`, reconciliation (`verify`, `parity`), the
lifecycle and `promote`, cache keys and stored-file checks.

REAL all-MiniLM-L6-v2 for the embedding cases (the shared artifact, a fp32 rebuild, one without its
Normalize module, one with max_seq_length 128); SYNTHETIC seeded tiny heads (tests/helpers/synthetic.py) for the
label cases. Every invalidation claim is also checked against what the engines actually return: a
"reusable" cache must hold the same numbers, an "invalidated" one must differ.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import readout_sdk
from helpers import synthetic
from helpers.artifacts import linked_copy
from helpers.measured import record_invalidation
from readout_export.build import build
from readout_export.cli import main
from readout_sdk.artifact import ArtifactError, sha256_file

SENTIMENT = ["negative", "neutral", "positive"]
TEXTS = ["I loved it.", "Terrible service, never again.", "It was fine, I suppose.", "Best day ever!",
         "The report is due on Monday and nobody has started it yet."]
LONG = " ".join(["the quick brown fox jumps over the lazy dog"] * 40)


def _build(root: Path, model: Path, **manifest) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    doc = {"schema": "readout-export/manifest/1", "model": str(model), "output_dir": str(root / "artifact"),
           **manifest}
    (root / "manifest.json").write_text(json.dumps(doc))
    return build(root / "manifest.json").output_dir


def _diff(a: Path, b: Path) -> tuple[int, dict]:
    result = CliRunner().invoke(main, ["diff", str(a), str(b), "--json"])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.output)


def _minilm_variant(root: Path, *, normalize: bool = True, max_seq_length: int | None = None) -> Path:
    """The real MiniLM directory with links to its files, minus its Normalize module or with another
    max_seq_length (the manifest may not contradict the model directory, so the directory changes)."""
    src = synthetic.minilm_path()
    shutil.copytree(src, root, symlinks=False, copy_function=lambda a, b: Path(b).symlink_to(a))
    if not normalize:
        modules = [m for m in json.loads((src / "modules.json").read_text()) if not m["type"].endswith("Normalize")]
        (root / "modules.json").unlink()
        (root / "modules.json").write_text(json.dumps(modules))
    if max_seq_length is not None:
        cfg = json.loads((src / "sentence_bert_config.json").read_text())
        (root / "sentence_bert_config.json").unlink()
        (root / "sentence_bert_config.json").write_text(json.dumps({**cfg, "max_seq_length": max_seq_length}))
    return root


@pytest.fixture(scope="module")
def minilm(shared, tmp_path_factory):
    """name -> artifact: the shared 4-target MiniLM, a fp32 rebuild, no Normalize, max_seq_length 128."""
    root = tmp_path_factory.mktemp("minilm")
    real = synthetic.minilm_path()
    return {"shared": shared("embedding")[1],
            "rebuild": _build(root / "rebuild", real, family="embedding", max_length=256),
            "no_norm": _build(root / "no_norm", _minilm_variant(root / "m_no_norm", normalize=False),
                              family="embedding", max_length=256),
            "len128": _build(root / "len128", _minilm_variant(root / "m_128", max_seq_length=128),
                             family="embedding", max_length=128)}


def _permuted_copy(src: Path, dst: Path, order: list[int]) -> Path:
    """The classifier's head rows and its label map permuted together: same meaning, other coordinates."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(src, dst)
    state = load_file(str(dst / "model.safetensors"))
    for name in ("classifier.weight", "classifier.bias"):
        state[name] = state[name][order].contiguous()
    save_file(state, str(dst / "model.safetensors"), metadata={"format": "pt"})
    cfg = json.loads((dst / "config.json").read_text())
    labels = [cfg["id2label"][str(i)] for i in order]
    cfg["id2label"] = {str(i): lab for i, lab in enumerate(labels)}
    cfg["label2id"] = {lab: i for i, lab in enumerate(labels)}
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def _unproven_copy(src: Path, dst: Path) -> Path:
    """A linked copy of a session-shared artifact without whatever evidence other tests kept in it."""
    linked_copy(src, dst)
    (dst / "parity.json").unlink(missing_ok=True)
    return dst


@pytest.fixture(scope="module")
def heads(shared, tmp_path_factory):
    """Seeded tiny heads: a classifier, its label names renamed, its rows permuted with the label map,
    with an int8 target added; a multilabel head with two threshold vectors. The classifier and the first
    multilabel build are the session's shared ones (tests/helpers/sdk_fixtures.py: the same models and manifests)."""
    root = tmp_path_factory.mktemp("heads")
    base, base_art = shared("classify")
    multi, t1_art = shared("multilabel")
    renamed = synthetic.make_model("bert", "sequence_classification", root / "m_renamed", labels=["neg", "neu", "pos"])
    permuted = _permuted_copy(base, root / "m_permuted", [2, 0, 1])
    cls = {"family": "sequence_classification"}
    fp32_int8 = [{"format": "onnx", "precision": "fp32"}, {"format": "onnx", "precision": "int8"}]
    return {"base": _unproven_copy(base_art, root / "base"), "renamed": _build(root / "renamed", renamed, **cls),
            "permuted": _build(root / "permuted", permuted, **cls),
            "with_int8": _build(root / "with_int8", base, **cls, targets=fp32_int8),
            "t1": _unproven_copy(t1_art, root / "t1"),
            "t2": _build(root / "t2", multi, family="multilabel_classification", thresholds=[0.5, 0.6, 0.55])}


INVALIDATES_ALL = {"contextual_cache": True, "vector_cache": True, "raw_scores": True, "calibrated_scores": True,
                   "decisions": True}


def test_identical_rebuild_is_same_and_extra_targets_are_listed_unproven(minilm, tmp_path):
    shared = linked_copy(minilm["shared"], tmp_path / "shared")
    (shared / "parity.json").unlink(missing_ok=True)  # whatever other tests kept: this copy has no evidence
    code, doc = _diff(minilm["rebuild"], shared)
    record_invalidation("identical rebuild (MiniLM)", doc)
    assert code == 0 and doc["same"] is True and doc["changes"] == []
    assert set(doc["layers"].values()) == {"same"} and not any(doc["invalidates"].values())
    assert doc["a"]["release_id"] == doc["b"]["release_id"]
    targets = {t["target"]: t for t in doc["targets"]}
    assert targets["onnx-fp32"]["in"] == "both"
    for name in ("onnx-int8", "onnx-bf16", "onnx-int8-openvino"):  # only in b: never silently compatible
        assert targets[name]["in"] == "b" and targets[name]["parity"]["b"] == "not run"
        assert targets[name]["status"] == "compatibility unproven until parity passes"
    a, b = readout_sdk.load(minilm["rebuild"]), readout_sdk.load(minilm["shared"], target="onnx-fp32")
    assert a.cache_key("vectors") == b.cache_key("vectors")
    np.testing.assert_allclose(a.embed(TEXTS).vectors, b.embed(TEXTS).vectors, atol=1e-6)


def test_normalize_change_invalidates_vectors_but_not_contextual_rows(minilm):
    code, doc = _diff(minilm["rebuild"], minilm["no_norm"])
    record_invalidation("normalize l2 -> none (MiniLM)", doc)
    assert code == 1 and doc["same"] is False
    assert doc["layers"] == {"tokenizer": "same", "contextual": "same", "readout": "changed", "head": "same",
                             "calibration": "same", "decision": "same"}
    assert {"layer": "readout", "field": "normalize", "a": "l2", "b": "none"} in doc["changes"]
    assert doc["invalidates"] == {**INVALIDATES_ALL, "contextual_cache": False}
    a, b = readout_sdk.load(minilm["rebuild"]), readout_sdk.load(minilm["no_norm"])
    assert a.cache_key("contextual") == b.cache_key("contextual")
    assert a.cache_key("vectors") != b.cache_key("vectors")
    va, vb = a.embed(TEXTS).vectors, b.embed(TEXTS).vectors
    np.testing.assert_allclose(np.linalg.norm(va, axis=1), 1, atol=1e-5)
    assert np.abs(np.linalg.norm(vb, axis=1) - 1).min() > 1e-2  # the old vectors really are wrong now
    np.testing.assert_allclose(vb / np.linalg.norm(vb, axis=1, keepdims=True), va, atol=1e-5)  # same rows beneath


def test_max_length_change_invalidates_everything(minilm):
    code, doc = _diff(minilm["rebuild"], minilm["len128"])
    record_invalidation("max_length 256 -> 128 (MiniLM)", doc)
    assert code == 1 and doc["layers"]["tokenizer"] == "changed"
    assert {c["field"] for c in doc["changes"] if c["layer"] == "tokenizer"} >= {"max_length", "tokenizer_sha256"}
    assert all(doc["layers"][k] == "same" for k in ("contextual", "readout", "head", "calibration", "decision"))
    assert doc["invalidates"] == INVALIDATES_ALL
    a, b = readout_sdk.load(minilm["rebuild"]), readout_sdk.load(minilm["len128"])
    assert a.cache_key("contextual") != b.cache_key("contextual")
    assert float(a.embed([LONG]).vectors[0] @ b.embed([LONG]).vectors[0]) < 0.9999  # truncation moved


def test_label_rename_keeps_vectors_and_invalidates_scores_and_decisions(heads):
    code, doc = _diff(heads["base"], heads["renamed"])
    record_invalidation("label names renamed (seeded head)", doc)
    assert code == 1 and doc["layers"]["head"] == "changed"
    assert all(doc["layers"][k] == "same" for k in ("tokenizer", "contextual", "readout", "calibration", "decision"))
    assert {"layer": "head", "field": "labels", "a": SENTIMENT, "b": ["neg", "neu", "pos"]} in doc["changes"]
    assert doc["invalidates"] == {**INVALIDATES_ALL, "contextual_cache": False, "vector_cache": False}
    assert "migration" not in doc


def test_head_permuted_with_its_label_map_keeps_decisions_by_label(heads):
    code, doc = _diff(heads["base"], heads["permuted"])
    record_invalidation("head rows permuted with the label map (seeded head)", doc)
    assert code == 1 and doc["layers"]["head"] == "changed" and doc["layers"]["decision"] == "same"
    assert {c["field"] for c in doc["changes"]} == {"labels", "head_sha256"}
    assert doc["invalidates"] == {"contextual_cache": False, "vector_cache": False, "raw_scores": True,
                                  "calibrated_scores": False, "decisions": False}
    assert "permuted" in doc["migration"]
    assert doc["a"]["release_id"] != doc["b"]["release_id"]  # other coordinates: another release
    a, b = readout_sdk.load(heads["base"]), readout_sdk.load(heads["permuted"])
    assert a.cache_key("raw_scores") != b.cache_key("raw_scores")
    assert a.cache_key("decisions") == b.cache_key("decisions")
    ca, cb = a.classify(TEXTS), b.classify(TEXTS)
    assert [x.label for x in ca] == [x.label for x in cb]  # decisions by name: kept
    for x, y in zip(ca, cb):
        assert x.scores == pytest.approx(y.scores, abs=1e-5)
    ra = np.stack([o[0]["logits"] for o in a.raw_outputs(TEXTS)])
    rb = np.stack([o[0]["logits"] for o in b.raw_outputs(TEXTS)])
    assert not np.allclose(ra, rb, atol=1e-3)  # positional raw scores: really different
    np.testing.assert_allclose(ra[:, [2, 0, 1]], rb, atol=1e-5)


def test_thresholds_only_change_the_decision_layer(heads):
    code, doc = _diff(heads["t1"], heads["t2"])
    record_invalidation("thresholds only (seeded multilabel head)", doc)
    assert code == 1
    assert [k for k, v in doc["layers"].items() if v == "changed"] == ["decision"]
    assert [c["field"] for c in doc["changes"]] == ["thresholds"]
    assert doc["invalidates"] == {"contextual_cache": False, "vector_cache": False, "raw_scores": False,
                                  "calibrated_scores": False, "decisions": True}
    a, b = readout_sdk.load(heads["t1"]), readout_sdk.load(heads["t2"])
    assert a.cache_key("raw_scores") == b.cache_key("raw_scores") and a.cache_key("decisions") != b.cache_key("decisions")
    for x, y in zip(a.classify(TEXTS), b.classify(TEXTS)):
        assert x.scores == pytest.approx(y.scores, abs=1e-6)  # raw scores reusable: the same numbers


def test_added_int8_target_is_unproven_until_its_parity_passes(heads, tmp_path):
    b = linked_copy(heads["with_int8"], tmp_path / "b")
    _, doc = _diff(heads["base"], b)
    assert doc["same"] is True
    entry = {t["target"]: t for t in doc["targets"]}["onnx-int8"]
    assert entry["in"] == "b" and entry["status"] == "compatibility unproven until parity passes"
    assert CliRunner().invoke(main, ["parity", str(b), "--widths", "1,7", "-q"]).exit_code == 0
    entry = {t["target"]: t for t in _diff(heads["base"], b)[1]["targets"]}["onnx-int8"]
    assert entry["parity"]["b"] == "PASS" and entry["status"] == "parity passed in b"


def _rewrite_record(art: Path, edit) -> None:
    """Apply ``edit`` to the ABI record in readout.json and in every graph; recompute the file hashes."""
    import onnx

    from readout_sdk.abi import METADATA_KEY

    meta = json.loads((art / "readout.json").read_text())
    edit(meta["abi"])
    for t in meta["targets"]:
        path = art / t["file"]
        model = onnx.load(str(path))
        for prop in model.metadata_props:
            if prop.key == METADATA_KEY:
                prop.value = json.dumps(meta["abi"])
        path.unlink()  # a hard link to the shared graph: write a new file
        onnx.save(model, str(path))
        t["sha256"] = sha256_file(path)
    (art / "readout.json").write_text(json.dumps(meta))


def _tamper_labels(art: Path, recompute_identity: bool) -> None:
    """Reverse the label order (and, with ``recompute_identity``, recompute the identity digests too, as a
    careful forger would)."""
    from readout_sdk.release.identity import compute

    def edit(record: dict) -> None:
        record["output"]["labels"] = record["output"]["labels"][::-1]
        if recompute_identity:
            record["identity"] = compute({k: v for k, v in record.items() if k != "identity"},
                                         record["identity"]["weights"])

    _rewrite_record(art, edit)


def test_label_reversal_is_refused_or_caught_by_reconciliation(heads, tmp_path):
    naive = linked_copy(heads["base"], tmp_path / "naive")
    _tamper_labels(naive, recompute_identity=False)
    with pytest.raises(ArtifactError, match="identity.layers.head does not match"):
        readout_sdk.load(naive)
    forged = linked_copy(heads["base"], tmp_path / "forged")
    _tamper_labels(forged, recompute_identity=True)
    assert readout_sdk.load(forged).labels == tuple(SENTIMENT[::-1])  # structurally valid: it loads
    code, doc = _diff(heads["base"], forged)  # reordered names over unchanged rows: not a permutation
    assert code == 1 and "migration" not in doc and doc["invalidates"]["decisions"]
    result = CliRunner().invoke(main, ["verify", str(forged)])
    assert result.exit_code == 1
    line = next(x for x in result.output.splitlines() if "head.labels" in x)
    assert "FAIL" in line and str(SENTIMENT[::-1]) in line and str(SENTIMENT) in line
    parity = CliRunner().invoke(main, ["parity", str(forged), "--widths", "7"])
    assert parity.exit_code == 1
    assert any("head.labels" in x and "FAIL" in x for x in parity.output.splitlines())
    assert json.loads((forged / "readout.json").read_text())["lifecycle"]["state"] == "DRAFT"


def test_verify_passes_a_clean_build_and_is_not_evaluated_without_its_source(heads, tmp_path):
    ok = CliRunner().invoke(main, ["verify", str(heads["base"]), "--json"])
    assert ok.exit_code == 0, ok.output
    report = json.loads(ok.output)["reconciliation"]
    assert report["decision"] == "PASS" and all(f["same"] for f in report["fields"])
    names = {f["field"] for f in report["fields"]}
    for field in ("head.labels", "head.score_type", "tokenizer.max_length", "tokenizer.truncation",
                  "tokenizer.special_token_ids", "tokenizer.tokenizer_sha256", "readout.content_excluded_ids",
                  "readout.rows", "head.outputs", "contextual.backbone_sha256", "head.head_sha256"):
        assert field in names
    moved = linked_copy(heads["base"], tmp_path / "moved")
    meta = json.loads((moved / "readout.json").read_text())
    meta["source"]["model"] = str(tmp_path / "gone")
    (moved / "readout.json").write_text(json.dumps(meta))
    result = CliRunner().invoke(main, ["verify", str(moved)])
    assert result.exit_code == 0 and "reconciliation NOT_EVALUATED" in result.output and "gone" in result.output
    as_json = json.loads(CliRunner().invoke(main, ["verify", str(moved), "--json"]).output)
    assert as_json["ok"] is False and as_json["reconciliation"]["decision"] == "NOT_EVALUATED"  # never reads as a pass
    assert CliRunner().invoke(main, ["verify", str(moved), "--strict"]).exit_code == 1


def test_promote_needs_evaluated_evidence_and_writes_a_rollback_target(heads, tmp_path):
    parent, child = linked_copy(heads["base"], tmp_path / "parent"), linked_copy(heads["renamed"], tmp_path / "child")
    refused = CliRunner().invoke(main, ["promote", str(child), "--parent", str(parent)])
    assert refused.exit_code == 2 and "is DRAFT, not EVALUATED" in refused.output and "parity" in refused.output
    assert not (child / "compatibility.json").exists()
    for art in (parent, child):
        assert CliRunner().invoke(main, ["parity", str(art), "--widths", "1,7", "-q"]).exit_code == 0
        assert json.loads((art / "readout.json").read_text())["lifecycle"]["state"] == "RECONCILED"
    not_yet = CliRunner().invoke(main, ["promote", str(child), "--parent", str(parent)])
    assert not_yet.exit_code == 2 and "not EVALUATED" in not_yet.output and "--role test" in not_yet.output
    texts = ["a fine day", "the worst film", "it rains", "so good", "meh", "a chair"]
    # gold labels are the SDK's own decisions, so accuracy is exactly 1: what is tested is the lifecycle
    gold = readout_sdk.load(child).classify(texts)
    data = tmp_path / "test.jsonl"
    data.write_text("".join(json.dumps({"text": t, "label": g.label}) + "\n" for t, g in zip(texts, gold)))
    ran = CliRunner().invoke(main, ["evaluate", str(child), "--data", str(data), "--role", "test",
                                    "--gate", "accuracy>=0.99", "-q"])
    assert ran.exit_code == 0, ran.output
    assert json.loads((child / "readout.json").read_text())["lifecycle"]["state"] == "EVALUATED"
    result = CliRunner().invoke(main, ["promote", str(child), "--parent", str(parent), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    kept = json.loads((child / "compatibility.json").read_text())
    assert kept == doc
    parent_id = json.loads((parent / "readout.json").read_text())["abi"]["identity"]["release_id"]
    assert doc["rollback"]["release_id"] == parent_id
    for name, digest in doc["rollback"]["files"].items():
        assert sha256_file(parent / name) == digest
    assert {s["cache"]: s["action"] for s in doc["invalidation_plan"]}["vector_cache"] == "reuse"
    assert doc["diff"]["layers"]["head"] == "changed"
    meta = json.loads((child / "readout.json").read_text())
    assert meta["lifecycle"]["state"] == "CANDIDATE"
    shown = CliRunner().invoke(main, ["inspect", str(child)]).output
    assert "lifecycle  CANDIDATE" in shown and "compatibility.json" in shown
    meta["lifecycle"]["state"] = "EVALUATED"  # typed by hand: inspect and verify say its evidence disagrees
    (child / "readout.json").write_text(json.dumps(meta))
    assert "MISMATCH" in CliRunner().invoke(main, ["inspect", str(child)]).output
    assert CliRunner().invoke(main, ["verify", str(child)]).exit_code == 1


def test_diff_exit_codes_and_refusals(minilm, heads, tmp_path):
    assert CliRunner().invoke(main, ["diff", str(minilm["rebuild"]), str(minilm["shared"])]).exit_code == 0
    text = CliRunner().invoke(main, ["diff", str(minilm["rebuild"]), str(minilm["no_norm"])])
    assert text.exit_code == 1 and "normalize: 'l2' -> 'none'" in text.output
    missing = CliRunner().invoke(main, ["diff", str(minilm["rebuild"]), str(tmp_path / "nothing")])
    assert missing.exit_code == 2 and len(missing.output.strip().splitlines()) == 1
    old = linked_copy(heads["base"], tmp_path / "old")
    _rewrite_record(old, lambda record: record.pop("identity"))  # as built before readout-identity/1
    assert readout_sdk.load(old).identity is None  # older artifacts still load
    refused = CliRunner().invoke(main, ["diff", str(heads["base"]), str(old)])
    assert refused.exit_code == 2 and "no identity section" in refused.output


def test_stored_vectors_are_checked_against_the_artifact(minilm, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from readout_sdk.serving.ray import Predictor
    from readout_sdk.release.stored import check_stored

    table = Predictor(str(minilm["shared"]), target="onnx-fp32")(pa.table({"text": TEXTS}))
    pq.write_table(table, tmp_path / "vectors.parquet")
    assert check_stored(tmp_path / "vectors.parquet", readout_sdk.load(minilm["rebuild"])).valid
    verdict = check_stored(tmp_path / "vectors.parquet", readout_sdk.load(minilm["no_norm"]))
    assert not verdict.valid and "re-encode" in verdict.reason
    assert not check_stored(tmp_path / "vectors.parquet", readout_sdk.load(minilm["shared"], target="onnx-int8")).valid
    assert not check_stored(tmp_path / "vectors.parquet",
                            readout_sdk.load(minilm["shared"], target="onnx-int8-openvino")).valid
    pq.write_table(table.replace_schema_metadata({}), tmp_path / "plain.parquet")
    assert not check_stored(tmp_path / "plain.parquet", readout_sdk.load(minilm["rebuild"])).valid


def test_stored_decisions_follow_the_decision_layers(heads, tmp_path):
    """A classifier's stored records (labels and scores by name) stay valid for a head permuted with its
    label map, and not for renamed labels or other thresholds."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from readout_sdk.serving.ray import Predictor
    from readout_sdk.release.stored import check_stored

    pq.write_table(Predictor(str(heads["base"]))(pa.table({"text": TEXTS})), tmp_path / "labels.parquet")
    assert pq.read_schema(tmp_path / "labels.parquet").metadata[b"readout.outputs"] == b"decisions"
    assert check_stored(tmp_path / "labels.parquet", readout_sdk.load(heads["permuted"])).valid
    assert not check_stored(tmp_path / "labels.parquet", readout_sdk.load(heads["renamed"])).valid
    pq.write_table(Predictor(str(heads["t1"]))(pa.table({"text": TEXTS})), tmp_path / "multi.parquet")
    assert check_stored(tmp_path / "multi.parquet", readout_sdk.load(heads["t1"])).valid
    assert not check_stored(tmp_path / "multi.parquet", readout_sdk.load(heads["t2"])).valid


def test_a_relabelled_head_whose_rows_cannot_be_keyed_is_never_called_a_permutation(heads):
    """Where the build found no label-axis tensor (``head_by_label`` is None), reordering the label names
    alone must invalidate decisions: only rows keyed by label can prove a permutation."""
    import dataclasses

    from readout_sdk.artifact import open_artifact
    from readout_sdk.release.compat import diff
    from readout_sdk.release.identity import compute

    art = open_artifact(heads["base"])

    def variant(labels: list[str]):
        record = json.loads(json.dumps(art.record))
        weights = dict(record["identity"]["weights"], head_by_label=None)
        record["output"]["labels"] = labels
        record["identity"] = compute({k: v for k, v in record.items() if k != "identity"}, weights)
        return dataclasses.replace(art, record=record)

    doc = diff(variant(SENTIMENT), variant(SENTIMENT[::-1]))
    assert "migration" not in doc and doc["invalidates"]["decisions"] and doc["invalidates"]["calibrated_scores"]
