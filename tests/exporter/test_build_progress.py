"""Feedback on long work (issue 48 point 3): build's progress goes to stderr in every mode, so `--json` keeps
stdout for the one result object and still shows what it is doing; --quiet prints nothing but errors."""
from __future__ import annotations

import json

from click.testing import CliRunner

from readout_export.cli.main import main
from readout_export.cli.progress import Steps

from helpers.synthetic import make_model


def _manifest(tmp_path):
    model = make_model("bert", "sequence_classification", tmp_path / "model", labels=["no", "yes"])
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"schema": "readout-export/manifest/1", "family": "sequence_classification",
                                "model": str(model), "output_dir": str(tmp_path / "art"), "max_length": 32}))
    return path


def test_build_json_prints_one_object_and_its_progress_on_stderr(tmp_path):
    result = CliRunner().invoke(main, ["build", str(_manifest(tmp_path)), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)  # stdout is the result alone
    assert doc["ok"] is True and doc["family"] == "sequence_classification"
    assert "exporting model.onnx-fp32.onnx" in result.stderr and "checking model.onnx-fp32.onnx" in result.stderr
    quiet = CliRunner().invoke(main, ["build", str(_manifest(tmp_path / "q")), "--quiet", "--force"])
    assert quiet.exit_code == 0 and quiet.stderr == "" and quiet.stdout == ""


def test_steps_print_plain_lines_off_a_terminal_and_nothing_when_disabled(capsys):
    with Steps(live=False) as step:
        step("loading the model")
        step("exporting")
    assert capsys.readouterr().err == "  loading the model\n  exporting\n"
    with Steps(enabled=False) as step:
        step("loading the model")
    assert capsys.readouterr().err == ""


def test_steps_on_a_terminal_keep_every_line(capsys):
    # the live display (rich) prints each step above the spinner: the lines a log would show are all there
    with Steps(live=True) as step:
        step("loading the model")
        step("calibrating int8 ranges")
    err = capsys.readouterr().err
    assert "loading the model" in err and "calibrating int8 ranges" in err
