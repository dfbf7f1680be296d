"""Faults while writing (issue 15): a build killed at any moment leaves nothing that looks like an artifact
and nothing that blocks the next one; concurrent builds of one output never both succeed (SYNTHETIC model)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers import synthetic
import readout_sdk
from readout_export.cli import main
from readout_sdk.staging import exclusive


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return synthetic.make_model("bert", "sequence_classification", tmp_path_factory.mktemp("m") / "model",
                                labels=["no", "yes"])


def manifest(tmp_path: Path, model: Path) -> Path:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"schema": "readout-export/manifest/1", "model": str(model),
                                "family": "sequence_classification", "output_dir": "out/artifact",
                                "targets": [{"format": "onnx", "precision": "fp32"},
                                            {"format": "onnx", "precision": "int8"}]}))
    return path


def build_process(path: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "readout_export.cli", "build", "--quiet", str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def debris(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir()) if parent.exists() else []


def _kill_mid_build(path: Path, out: Path, sig: int) -> subprocess.Popen:
    proc = build_process(path)
    deadline = time.monotonic() + 120
    while not any((p / "tokenizer.json").exists() for p in out.glob(".artifact.partial-*")):  # mid-build
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the build never started writing"
        time.sleep(0.05)
    proc.send_signal(sig)
    proc.wait(30)
    return proc


@pytest.mark.heavy
def test_a_killed_build_leaves_no_artifact_and_the_next_build_sweeps_its_debris(tmp_path, model):
    path = manifest(tmp_path, model)
    out = tmp_path / "out"
    proc = _kill_mid_build(path, out, signal.SIGTERM)
    assert proc.returncode == 128 + signal.SIGTERM and debris(out) == []  # SIGTERM unwinds: nothing left
    _kill_mid_build(path, out, signal.SIGKILL)
    assert not (out / "artifact").exists()
    left = debris(out)
    assert any(n.startswith(".artifact.partial-") for n in left), left  # what kill -9 leaves ...
    with pytest.raises(readout_sdk.artifact.ArtifactError):
        readout_sdk.load(out / "artifact")
    again = CliRunner().invoke(main, ["build", "--quiet", str(path)])
    assert again.exit_code == 0, again.output
    assert debris(out) == ["artifact"]  # ... the next build of the same output removes, lock file included
    assert readout_sdk.load(out / "artifact").classify(["fine"])[0].label in ("no", "yes")


@pytest.mark.heavy
def test_two_builds_of_one_output_at_once_never_both_succeed(tmp_path, model):
    path = manifest(tmp_path, model)
    procs = [build_process(path), build_process(path)]
    results = [(p.wait(300), p.communicate()[1]) for p in procs]
    codes = sorted(code for code, _ in results)
    assert codes == [0, 2], results
    refused = next(err for code, err in results if code == 2).strip()
    assert refused.count("\n") == 0 and ("being built by another run" in refused or "already exists" in refused)
    assert debris(tmp_path / "out") == ["artifact"]


def test_a_build_refuses_an_output_another_run_holds_and_writes_nothing(tmp_path, model):
    path = manifest(tmp_path, model)
    out = (tmp_path / "out" / "artifact")
    out.parent.mkdir()
    with exclusive(out.absolute()):
        result = CliRunner().invoke(main, ["build", str(path)])
    assert result.exit_code == 2
    assert result.stderr.strip().startswith("error: ") and "being built by another run (pid" in result.stderr
    assert debris(tmp_path / "out") == []
    os.rmdir(tmp_path / "out")


def test_a_ledger_append_killed_mid_line_neither_blocks_nor_counts(tmp_path, monkeypatch):
    from readout_eval import lineage

    monkeypatch.setenv(lineage.LEDGER_ENV, str(tmp_path))
    lineage.append("root", {"sha256": "a", "role": "test"})
    with open(lineage.ledger_path("root"), "ab") as f:
        f.write(b'{"sha256": "b", "ro')  # what a kill during the write leaves
    assert [u["sha256"] for u in lineage.ledger("root")] == ["a"]
    lineage.append("root", {"sha256": "c", "role": "test"})
    assert [u["sha256"] for u in lineage.ledger("root")] == ["a", "c"]
    with open(lineage.ledger_path("root"), "ab") as f:
        f.write(b"not json\n")  # damage inside the file is still refused, naming the line
    lineage.append("root", {"sha256": "d", "role": "test"})
    with pytest.raises(readout_sdk.errors.InputRefused, match=r"root.jsonl:3: not JSON"):
        lineage.ledger("root")
