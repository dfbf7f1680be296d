"""Input roles and vector forms the exporter refuses, each in one line naming the JSON path, before
anything is written (`readout-export validate`). Models: SYNTHETIC tiny BERT layouts saved by
sentence-transformers 6 itself, edited where a configuration sentence-transformers writes is the point."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers import synthetic
from readout_export.cli import main


@pytest.fixture(scope="module")
def st_model(tmp_path_factory) -> Path:
    """A sentence-transformers layout with E5-style prompts (default: query), mean pooling."""
    root = tmp_path_factory.mktemp("st")
    model = synthetic.make_st_model("bert", root / "m", ["mean"])
    cfg = json.loads((model / "config_sentence_transformers.json").read_text())
    cfg |= {"prompts": {"query": "query: ", "document": "passage: "}, "default_prompt_name": "query"}
    (model / "config_sentence_transformers.json").write_text(json.dumps(cfg))
    return model


def _variant(st_model: Path, tmp_path: Path, edit) -> Path:
    model = tmp_path / "model"
    shutil.copytree(st_model, model)
    edit(model)
    return model


def _edit_json(path: Path, **changes) -> None:
    path.write_text(json.dumps(json.loads(path.read_text()) | changes))


def _validate(tmp_path: Path, model: Path, **fields):
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"schema": "readout-export/manifest/1", "model": str(model), "family": "embedding",
                                "output_dir": str(tmp_path / "out"), **fields}))
    return CliRunner().invoke(main, ["validate", str(path)])


def _refused(result, jpath: str, words: str) -> None:
    message = result.stderr.strip()
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert message.count("\n") == 0 and message.startswith(f"error: {jpath}:"), message
    assert words in message, message


def test_the_model_s_roles_validate_and_may_be_restated_only_when_equal(st_model, tmp_path):
    same = {"prompts": {"query": "query: ", "document": "passage: "}, "default": "query"}
    assert _validate(tmp_path, st_model, roles=same).exit_code == 0
    _refused(_validate(tmp_path, st_model, roles={"prompts": {"query": "query:", "document": "passage: "}}),
             "$.roles.prompts", "config_sentence_transformers.json (prompts) declares")
    _refused(_validate(tmp_path, st_model, roles={"default": "document"}), "$.roles.default",
             "manifest says 'document' but config_sentence_transformers.json (default_prompt_name) declares 'query'")


def test_a_default_naming_no_prompt_is_refused(st_model, tmp_path):
    model = _variant(st_model, tmp_path, lambda m: _edit_json(m / "config_sentence_transformers.json",
                                                              default_prompt_name="search_query"))
    _refused(_validate(tmp_path, model), "$.model", "default_prompt_name 'search_query' names no prompt")


@pytest.mark.parametrize("mode", ["weightedmean", "lasttoken"])
def test_prompt_exclusion_under_position_weighted_pooling_is_refused(st_model, tmp_path, mode):
    def edit(m: Path) -> None:
        pooling = next(p for p in m.iterdir() if p.name.endswith("_Pooling"))
        _edit_json(pooling / "config.json", pooling_mode=mode, include_prompt=False)

    _refused(_validate(tmp_path, _variant(st_model, tmp_path, edit)), "$.model",
             "excludes prompt rows (include_prompt: false) under pooling")


def test_prompts_and_windows_do_not_combine(st_model, tmp_path):
    _refused(_validate(tmp_path, st_model, long_inputs={"policy": "windows", "stride": 8, "aggregation": "mean"}),
             "$.long_inputs.policy", "prompts and windows do not combine")


def test_prompts_on_a_family_without_roles_are_refused(tmp_path):
    model = synthetic.make_model("bert", "sequence_classification", tmp_path / "cls", labels=["no", "yes"])
    (model / "config_sentence_transformers.json").write_text(json.dumps({"prompts": {"query": "query: "}}))
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"schema": "readout-export/manifest/1", "model": str(model),
                                "family": "sequence_classification", "output_dir": str(tmp_path / "out")}))
    _refused(CliRunner().invoke(main, ["validate", str(path)]), "$.model",
             "sequence_classification takes no input roles")


def test_an_asymmetric_router_is_refused_by_name(st_model, tmp_path):
    def edit(m: Path) -> None:
        modules = json.loads((m / "modules.json").read_text())
        modules.insert(1, {"idx": 1, "name": "router", "path": "", "type": "sentence_transformers.base.modules.Router"})
        (m / "modules.json").write_text(json.dumps(modules))

    _refused(_validate(tmp_path, _variant(st_model, tmp_path, edit)), "$.model", "Router")


def test_vector_forms_refusals(st_model, tmp_path):
    _refused(_validate(tmp_path, st_model, vectors={"precisions": ["int8"]}), "$.vectors.calibration",
             "int8/uint8 forms need a calibration corpus")
    (tmp_path / "calib.jsonl").write_text(json.dumps({"text": "A kitten naps on the rug."}) + "\n")
    _refused(_validate(tmp_path, st_model, vectors={"precisions": ["int8"], "calibration": "calib.jsonl"}),
             "$.vectors.calibration", "shares 1 text(s) with the parity corpus")
    _refused(_validate(tmp_path, st_model, vectors={"precisions": ["float32"]}), "$.vectors", "declares no form")
    _refused(_validate(tmp_path, st_model, vectors={"widths": [32]}), "$.vectors.widths",
             "[32] must be below the model's dimension 32")
    _refused(_validate(tmp_path, st_model, vectors={"precisions": ["binary"], "calibration": "calib.jsonl"}),
             "$.vectors.calibration", "only int8/uint8 forms are calibrated")
