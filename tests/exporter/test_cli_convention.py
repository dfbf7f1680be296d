"""One meaning per flag (issue 48 point 1): on every command, `--json` is a switch that prints the result as
JSON on stdout; a file a command writes has its own option (`--report`, `--junit`, `--plot`), and a value that
looks like an option is refused instead of becoming a file named `-q`."""
from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from readout_export.cli.main import main


def _commands(group: click.Group = main, prefix: tuple[str, ...] = ()):
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from _commands(command, prefix + (name,))
        else:
            yield prefix + (name,), command


COMMANDS = list(_commands())


def test_every_subcommand_is_walked():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"build", "parity", "evaluate", "bench", "validate", "inspect", "verify"} <= names


@pytest.mark.parametrize("path,command", COMMANDS, ids=[" ".join(p) for p, _ in COMMANDS])
def test_json_is_a_switch_and_files_refuse_option_like_values(path, command):
    # the help a user reads says it, too
    help_text = CliRunner().invoke(main, [*path, "--help"], terminal_width=200).output
    for param in command.params:
        if not isinstance(param, click.Option):
            continue
        if "--json" in param.opts:
            assert param.is_flag, f"{' '.join(path)} --json takes a value"
            assert "--json" in help_text
        if isinstance(param.type, click.Path) and not param.type.exists:
            # any path this command may write: `--report -q` must not make a file named -q
            with pytest.raises(click.BadParameter, match="looks like an option"):
                param.type.convert("-q", param, click.Context(command))


def test_parity_json_prints_the_report_and_report_writes_it(shared, tmp_path):
    from helpers.artifacts import linked_copy

    artifact = linked_copy(shared("classify")[1], tmp_path / "classify")
    printed = CliRunner().invoke(main, ["parity", str(artifact), "--widths", "7", "--json",
                                        "--report", str(tmp_path / "p.json")])
    assert printed.exit_code == 0, printed.output
    doc = json.loads(printed.stdout)  # nothing but the report on stdout
    assert doc["summary"]["FAIL"] == 0 and doc["checks"]
    assert json.loads((tmp_path / "p.json").read_text())["summary"] == doc["summary"]
    refused = CliRunner().invoke(main, ["parity", str(artifact), "--report", "-q"])
    assert refused.exit_code == 2 and "looks like an option" in refused.output
    assert not (tmp_path / "-q").exists()
