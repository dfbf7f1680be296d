"""The parity harness: the MiniLM example (REAL) at fp32 and int8, every family at fp32 (SYNTHETIC
models), the gate's exit codes and reports, and a failure lab: deliberately broken exports that the
harness must FAIL, and a changed source it must refuse."""
from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner

from helpers import synthetic
from helpers.artifacts import linked_copy
from readout_export.cli import main
from readout_export.reference import check_parity as run_parity  # eager PyTorch as the reference
from readout_parity import FAIL, NOT_EVALUATED, PASS, ParityError

WIDTHS = (1, 7)


def by_metric(report, target="onnx-fp32"):
    return {c.metric: c for c in report.checks if c.target == target and c.provider == "CPUExecutionProvider"}


def test_minilm_fp32_and_int8(shared, tmp_path):
    artifact = shared("embedding")[1]
    reports = tmp_path / "reports" / "ci"  # absent, as on a fresh CI runner: the reports' directory is made
    result = CliRunner().invoke(main, ["parity", str(artifact), "--widths", "1,7", "--report", str(reports / "p.json"),
                                       "--junit", str(reports / "p.xml")])
    assert result.exit_code == 0, result.output
    assert (reports / "p.xml").read_text().startswith("<?xml")
    report = json.loads((reports / "p.json").read_text())
    checks = {(c["target"], c["metric"]): c for c in report["checks"] if c["provider"] == "CPUExecutionProvider"}
    for metric in ("max_abs_error", "min_cosine", "knn10_overlap", "rank_correlation"):
        assert checks[("onnx-fp32", metric)]["decision"] == PASS
    assert checks[("onnx-fp32", "max_abs_error")]["measured"] < 1e-5
    int8 = checks[("onnx-int8", "min_cosine")]
    assert int8["decision"] == PASS and 0.9 < int8["measured"] < 0.9999  # int8 really is measured, not copied
    assert any(c["decision"] == NOT_EVALUATED and "CUDA" in c["reason"] for c in report["checks"])
    informative = {m["metric"]: m["measured"] for m in report["measurements"]
                   if m["target"] == "eager-default-position-ids"}
    assert informative["min_cosine"] < 0.9  # what left padding does without mask-derived positions
    suite = ET.parse(reports / "p.xml").getroot()
    assert suite.tag == "testsuite" and int(suite.get("tests")) == len(report["checks"])
    assert len(suite.findall("testcase/skipped")) == report["summary"]["NOT_EVALUATED"]
    # the artifact keeps its last report and a summary; inspect shows it
    assert json.loads((artifact / "parity.json").read_text())["summary"] == report["summary"]
    assert "passed" in json.loads((artifact / "readout.json").read_text())["parity"]["summary"]
    assert "not evaluated" in CliRunner().invoke(main, ["inspect", str(artifact)]).stdout


def test_strict_turns_not_evaluated_into_exit_1(shared, tmp_path):
    """--strict: a NOT_EVALUATED check (here the CUDA provider's, as in the MiniLM run above) exits 1. On a
    copy of the tiny classifier: --strict changes the exit code, not what is measured, so a second MiniLM run
    would prove nothing more."""
    artifact = linked_copy(shared("classify")[1], tmp_path / "classify")
    lenient = CliRunner().invoke(main, ["parity", str(artifact), "--widths", "7", "-q"])
    assert lenient.exit_code == 0, lenient.output  # every evaluated check passes ...
    strict = CliRunner().invoke(main, ["parity", str(artifact), "--widths", "7", "--strict", "-q"])
    assert strict.exit_code == 1 and "not evaluated" in strict.stdout  # ... and still exit 1 under --strict


@pytest.mark.parametrize("key,metrics", [
    ("classify", ["max_abs_error", "argmax_agreement", "topk_agreement"]),
    ("multilabel", ["max_abs_error", "decision_agreement"]),
    ("regression", ["max_abs_error", "values_abs_error", "values_scaled_error", "values_rank_correlation"]),
    ("tag-bert", ["max_abs_error", "entity_agreement"]),
    ("qa", ["max_abs_error", "span_agreement"]),
    ("cross", ["max_abs_error", "rank_correlation", "topk_agreement"]),
    ("sparse", ["max_abs_error", "term_overlap"]),
    ("choice", ["max_abs_error", "argmax_agreement"]),
    ("late", ["max_abs_error", "maxsim_error"]),
])
def test_every_family_passes_at_fp32(shared, key, metrics):
    from readout_sdk.families import get

    report = run_parity(shared(key)[1], widths=WIDTHS)
    checks = by_metric(report)
    for metric in metrics:
        assert checks[metric].decision == PASS, checks[metric]
    assert report.exit_code() == 0 and report.exit_code(strict=True) == 1
    family = get(report.family)  # every metric measured is one the family declares (what the budgets test walks)
    targets = [c for c in report.checks if c.target != "reconciliation"]
    measured = {c.metric for c in targets if c.metric != "all"} | {m["metric"] for m in report.measurements}
    assert measured <= set(family.metric_names) | set(family.raw_metric_names), measured
    (recon,) = [c for c in report.checks if c.target == "reconciliation"]  # the semantic record, against the source
    assert recon.decision == PASS and recon.metric == "semantic_record"


def test_int8_regression_is_gated_and_nothing_passes_ungated(build_artifact, tmp_path, monkeypatch):
    """An int8 regression target used to get zero gated checks and exit 0; now its values are gated, and a
    target whose metrics have no budget is NOT_EVALUATED, never PASS."""
    import readout_parity.checks as K

    model = synthetic.make_model("distilbert", "regression", tmp_path / "m", problem_type="regression", num_labels=2)
    artifact = build_artifact({"model": str(model), "family": "regression", "labels": ["valence", "arousal"],
                               "targets": [{"format": "onnx", "precision": "fp32"},
                                           {"format": "onnx", "precision": "int8"}]})
    report = run_parity(artifact, widths=(7,))
    int8 = by_metric(report, "onnx-int8")
    assert {"values_scaled_error", "values_rank_correlation"} <= set(int8)
    assert all(c.decision in (PASS, FAIL) for c in int8.values())
    assert 0 < int8["values_scaled_error"].measured  # really measured on the int8 graph
    monkeypatch.setattr(K, "budgets_for", lambda precision, overrides, family=None: {})  # what target_budgets reads
    bare = run_parity(artifact, widths=(7,))
    ran = [c for c in bare.checks if c.provider == "CPUExecutionProvider"]
    assert ran and all(c.decision == NOT_EVALUATED and "no metric of regression has a budget" in c.reason
                       for c in ran)
    assert [c.target for c in bare.checks if c.decision == PASS] == ["reconciliation"]  # no target passes
    assert bare.exit_code(strict=True) == 1


def test_user_corpus(shared, tmp_path):
    lines = [json.dumps({"text": t}) for t in ("one", "two words", "three more words", "x " * 300)]
    (tmp_path / "c.jsonl").write_text("\n".join(lines))
    report = run_parity(shared("classify")[1], corpus=tmp_path / "c.jsonl", widths=(2,))
    assert report.corpus["items"] == 4 and report.corpus["max_tokens"] == 128
    (tmp_path / "bad.jsonl").write_text('{"txt": "typo"}\n')
    result = CliRunner().invoke(main, ["parity", str(shared("classify")[1]), "--corpus", str(tmp_path / "bad.jsonl")])
    assert result.exit_code == 2 and "bad.jsonl:1" in result.stderr


def _broken_build(monkeypatch, build_artifact, tmp_path, family, model, patch, **manifest):
    """Build with a deliberately broken graph; the harness's reference is built afterwards, unpatched."""
    with monkeypatch.context() as m:
        patch(m)
        return build_artifact({"model": str(model), "family": family, **manifest})


def test_failure_lab_unshifted_positions(monkeypatch, build_artifact, tmp_path):
    """Left padding with transformers' default position ids (no compaction in the graph)."""
    import readout_export.graph.readout as g

    model = synthetic.make_model("bert", "sequence_classification", tmp_path / "m", labels=["a", "b", "c"])
    original = g.ReadoutGraph.__init__

    def no_compaction(self, *a, **kw):
        original(self, *a, **{**kw, "compact_rows": False})

    artifact = _broken_build(monkeypatch, build_artifact, tmp_path, "sequence_classification", model,
                             lambda m: m.setattr(g.ReadoutGraph, "__init__", no_compaction))
    report = run_parity(artifact, widths=(7,))
    check = by_metric(report)["max_abs_error"]
    assert check.decision == FAIL and "left padding" in check.reason
    assert report.exit_code() == 1


def test_failure_lab_zero_filled_max_and_column_zero(monkeypatch, build_artifact, tmp_path):
    """max pooling that lets a zeroed padding row win, and a 'first row' read from physical column 0."""
    import torch

    import readout_export.graph.readout as g

    model = synthetic.make_model("bert", "embedding", tmp_path / "m")
    original = g.pool

    def broken(h, rows, attention, mode):
        if mode == "max":
            return (h * rows.unsqueeze(-1)).max(1).values
        if mode == "first_valid":
            return h[:, 0]
        return original(h, rows, attention, mode)

    for mode in ("max", "first_valid"):
        artifact = _broken_build(monkeypatch, build_artifact, tmp_path / mode, "embedding", model,
                                 lambda m: m.setattr(g, "pool", broken), readout={"pooling": mode},
                                 output_dir=str(tmp_path / mode / "art"))
        report = run_parity(artifact, widths=(7,))
        assert by_metric(report)["max_abs_error"].decision == FAIL, mode
        assert by_metric(report)["min_cosine"].decision == FAIL, mode
    assert torch is not None


def test_failure_lab_label_order_swapped(monkeypatch, build_artifact, tmp_path):
    """The exported head's classes come out in another order than the label map says."""
    import readout_export.graph.loader as loader

    model = synthetic.make_model("bert", "sequence_classification", tmp_path / "m", labels=["a", "b", "c"])
    original = loader.Core.forward

    def swapped(self, *a, **kw):
        return tuple(o.flip(-1) for o in original(self, *a, **kw))

    artifact = _broken_build(monkeypatch, build_artifact, tmp_path, "sequence_classification", model,
                             lambda m: m.setattr(loader.Core, "forward", swapped))
    checks = by_metric(run_parity(artifact, widths=(7,)))
    assert checks["argmax_agreement"].decision == FAIL


def test_failure_lab_changed_source_weights_are_refused(shared, tmp_path, build_artifact):
    model = synthetic.make_model("bert", "sequence_classification", tmp_path / "m", labels=["a", "b", "c"])
    artifact = build_artifact({"model": str(model), "family": "sequence_classification"})
    synthetic.make_model("bert", "sequence_classification", tmp_path / "m2", labels=["a", "b", "c"], seed=9)
    shutil.copy(tmp_path / "m2" / "model.safetensors", model / "model.safetensors")
    with pytest.raises(ParityError, match="model.safetensors has sha256 .* built from"):
        run_parity(artifact, widths=(2,))
    result = CliRunner().invoke(main, ["parity", str(artifact)])
    assert result.exit_code == 2 and "source weights changed" in result.stderr


def test_manifest_parity_section_overrides_budgets(tmp_path, build_artifact):
    model = synthetic.make_model("bert", "sequence_classification", tmp_path / "m", labels=["a", "b", "c"])
    artifact = build_artifact({"model": str(model), "family": "sequence_classification",
                               "parity": {"fp32": {"max_abs_error": {"max": 1e-12}}}})
    check = by_metric(run_parity(artifact, widths=(7,)))["max_abs_error"]
    assert check.requirement == "<= 1e-12" and check.decision == FAIL  # a budget no float run can meet


def test_malformed_parity_section_is_a_manifest_error(tmp_path):
    model = synthetic.make_model("bert", "sequence_classification", tmp_path / "m", labels=["a", "b", "c"])
    (tmp_path / "m.json").write_text(json.dumps({"schema": "readout-export/manifest/1", "model": str(model),
                                                 "family": "sequence_classification", "output_dir": "o",
                                                 "parity": {"fp64": {"max_abs_error": {"max": 1}}}}))
    result = CliRunner().invoke(main, ["validate", str(tmp_path / "m.json")])
    assert result.exit_code == 2 and "$.parity" in result.stderr
