"""`verify` agrees with itself (issue 48 point 5): when the source model changed after parity, reconciliation
FAILs and the lifecycle line does not go on saying RECONCILED on the strength of the old evidence."""
from __future__ import annotations

import json
import shutil

from click.testing import CliRunner

from readout_export.cli.main import main

from helpers.artifacts import linked_copy


def test_a_changed_source_demotes_the_lifecycle_verify_prints(shared, tmp_path):
    model_dir, artifact = shared("classify")
    model = shutil.copytree(model_dir, tmp_path / "model")
    art = linked_copy(artifact, tmp_path / "art")
    meta = json.loads((art / "readout.json").read_text())
    meta["source"]["model"] = str(model)  # this copy's own source, so the shared one is never touched
    (art / "readout.json").write_text(json.dumps(meta))
    assert CliRunner().invoke(main, ["parity", str(art), "--widths", "7", "-q"]).exit_code == 0
    before = CliRunner().invoke(main, ["verify", str(art)])
    assert before.exit_code == 0 and "  lifecycle RECONCILED" in before.output, before.output

    config = json.loads((model / "config.json").read_text())
    labels = [config["id2label"][str(i)] for i in range(len(config["id2label"]))][::-1]
    config["id2label"] = {str(i): label for i, label in enumerate(labels)}
    config["label2id"] = {label: i for i, label in enumerate(labels)}
    (model / "config.json").write_text(json.dumps(config))

    after = CliRunner().invoke(main, ["verify", str(art)])
    assert after.exit_code == 1, after.output
    assert "reconciliation FAIL" in after.output or any("FAIL" in x and "head.labels" in x
                                                        for x in after.output.splitlines()), after.output
    assert "lifecycle RECONCILED" not in after.output, after.output
    assert "lifecycle FAIL: readout.json says" not in after.output  # one verdict, said once
    assert "  lifecycle DRAFT (missing: reconciliation with the source model: FAIL now" in after.output
    doc = json.loads(CliRunner().invoke(main, ["verify", str(art), "--json"]).output)
    assert doc["ok"] is False and doc["lifecycle"]["state"] == "DRAFT"
