"""Edges the session's review found (each test fails on the code before its fix):
a shortened max_length bounds every role's own length; a failure of the work keeps exit 1 when its error is
an SdkError; the live progress line prints step text, never reads it as markup."""
from __future__ import annotations

import json

from readout_export.cli.progress import Steps
from readout_export.cli.run import exit_code
from readout_export.planning.manifest import load_manifest
from readout_export.planning.resolve import resolve
from readout_sdk.errors import InputRefused
from readout_sdk.serving.ray import EncodeIncomplete

from helpers import synthetic


def test_a_shortened_max_length_bounds_each_roles_own_length(tmp_path):
    # a ColBERT-style model saved by sentence-transformers 6 (REAL MiniLM backbone), document_length 64
    model = synthetic.make_multi_vector_model(tmp_path / "model", expansion=8, document_length=64)
    path = tmp_path / "m.json"
    path.write_text(json.dumps({"schema": "readout-export/manifest/1", "model": str(model),
                                "output_dir": str(tmp_path / "out"), "family": "late_interaction", "max_length": 32}))
    plan = resolve(load_manifest(path))
    assert plan.max_length == 32
    assert plan.role_policy["document"]["max_length"] == 32  # not 64: the graph the record describes reads 32
    assert plan.role_policy["query"]["max_length"] <= 32
    assert any("document_length 64 cut to max_length 32" in n for n in plan.notes)


def test_a_failure_of_the_work_is_exit_1_a_refusal_exit_2():
    assert exit_code(EncodeIncomplete("3 rows written for 4 input rows")) == 1  # docs/reliability.md: the work failed
    assert exit_code(InputRefused("an empty text")) == 2


def test_the_live_line_prints_step_text_as_it_is(capsys):
    with Steps(live=True) as step:  # brackets are common in step text: [int8], a [/path]
        step("calibrating [int8] ranges from [/tmp/corpus]")
    assert "calibrating [int8] ranges from [/tmp/corpus]" in capsys.readouterr().err
