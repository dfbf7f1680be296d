"""What opening something that is not an artifact says (issue 48 point 5): the words lead to the fix."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

import readout_sdk
from readout_sdk.errors import SdkError
from readout_export.cli.main import main

from helpers.synthetic import minilm_path


def test_a_path_typo_says_it_does_not_exist(tmp_path):
    typo = tmp_path / "artifcat"
    with pytest.raises(SdkError, match="artifcat: does not exist$"):
        readout_sdk.load(typo)
    result = CliRunner().invoke(main, ["verify", str(typo)])
    assert result.exit_code == 2 and "does not exist" in result.output and "Traceback" not in result.output


def test_a_model_directory_says_build_it_first():
    # the REAL all-MiniLM-L6-v2 directory, as a user would point load() at it
    with pytest.raises(SdkError, match="a model directory, not an artifact .*build it first"):
        readout_sdk.load(minilm_path())


def test_another_directory_is_not_an_artifact(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(SdkError, match=r"not an artifact \(no readout.json\)$"):
        readout_sdk.load(tmp_path)
