"""The CLI's one map from errors to exit codes (issue 46 point 6): every SDK error a user causes is one line
and exit 2, never "unexpected failure" (exit 1, kept for real bugs), and never a traceback without --debug."""
from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from readout_export.cli import main
from readout_export.cli.run import run_command


def _one_refusal(result, code: int = 2) -> str:
    """The single ``error:`` line of a refused command (no traceback, no "unexpected failure")."""
    assert result.exit_code == code, result.output
    lines = [l for l in result.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output and "unexpected failure" not in result.output
    return lines[0]


def test_encode_refuses_an_input_that_is_not_jsonl_or_parquet(shared, tmp_path):
    """An `InputRefused` from the Ray encoder, before any cluster starts: one line naming the file, exit 2."""
    src = tmp_path / "rows.txt"
    src.write_text("one text\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["encode", str(shared("classify")[1]), "--input", str(src),
                                       "--output", str(tmp_path / "out")])
    line = _one_refusal(result)
    assert line == "error: rows.txt: --input must be a .jsonl (JSON Lines) or .parquet file"
    assert not (tmp_path / "out").exists()


def test_encode_refuses_a_role_the_artifact_does_not_declare(shared, tmp_path):
    """A `WrongCall` (a TypeError) from the roles the record declares: one line, exit 2, not a bug's exit 1."""
    src = tmp_path / "rows.jsonl"
    src.write_text('{"text": "one text"}\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["encode", str(shared("classify")[1]), "--input", str(src),
                                       "--output", str(tmp_path / "out"), "--role", "query"])
    line = _one_refusal(result)
    assert line == "error: role 'query' is not declared by this artifact; it declares no roles"


def _form() -> None:
    from readout_sdk.vector_forms import from_record

    from_record({"width": 8, "precision": "int8", "renormalize": False, "ranges": None}, "cosine")


def _device() -> None:
    from readout_sdk.targets.devices import device

    device("tpu")


def _closed() -> None:
    from readout_sdk.errors import Closed

    raise Closed("this onnxruntime runner is closed; open a new one")


def _parity() -> None:
    from readout_parity import ParityError

    raise ParityError("the corpus has no rows")


def _export_refused() -> None:
    from readout_export.errors import NoModelClass

    raise NoModelClass("bert has no AutoModelForPoems in transformers 4.0")


@pytest.mark.parametrize("call,code,says", [
    (_form, 2, "error: vector form: ranges are required for int8"),
    (_device, 2, "error: unknown device 'tpu'; known: cpu, cuda"),  # no quotes around it, as KeyError's str adds
    (_closed, 2, "error: this onnxruntime runner is closed; open a new one"),
    (_parity, 2, "error: the corpus has no rows"),
    (_export_refused, 2, "error: bert has no AutoModelForPoems in transformers 4.0"),
], ids=["form", "device", "closed", "parity", "no model class"])
def test_typed_refusals_are_one_line_and_exit_2(capsys, call, code, says):
    with pytest.raises(SystemExit) as exited:
        run_command(False, False, call)
    err = capsys.readouterr().err
    assert exited.value.code == code
    assert err.splitlines()[0].startswith(says) and len(err.splitlines()) == 1, err
    assert "unexpected failure" not in err and "Traceback" not in err


def test_a_real_bug_is_still_an_unexpected_failure(capsys):
    """The contrast: a plain error from a bug (not a refusal of the user's input) keeps exit 1 and its type."""
    with pytest.raises(SystemExit) as exited:
        run_command(False, False, lambda: {}["missing"])
    err = capsys.readouterr().err
    assert exited.value.code == 1
    assert re.match(r"error: unexpected failure \(KeyError: 'missing'\)", err), err
