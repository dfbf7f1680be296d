"""`readout_sdk.atomic` (files) and `readout_sdk.staging` (directories): what ends up on disk, read back with
the standard library, and that nothing half-written or left over remains beside the output."""
from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from readout_sdk.atomic import write_atomic, write_report
from readout_sdk.errors import Busy
from readout_sdk.staging import exclusive, lock_path, place, staged, sweep


def _beside(path: Path) -> list[str]:
    return sorted(p.name for p in path.parent.iterdir())


# ---- files ----------------------------------------------------------------------------------------
def test_write_atomic_writes_the_bytes_world_readable_and_leaves_nothing_else(tmp_path):
    target = tmp_path / "report.json"
    write_atomic(target, b"\x00first\xff")
    write_atomic(target, b"second")  # over an existing file
    assert target.read_bytes() == b"second"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert _beside(target) == ["report.json"]  # no temporary file left


def test_write_report_makes_missing_directories_and_writes_utf8(tmp_path):
    target = tmp_path / "reports" / "ci" / "parity.txt"
    write_report(str(target), "naïve ✓\n")
    assert target.read_bytes() == "naïve ✓\n".encode("utf-8")


# ---- directories ----------------------------------------------------------------------------------
def test_a_second_writer_of_the_same_output_is_refused_while_the_first_holds_it(tmp_path):
    out = tmp_path / "artifact"
    with exclusive(out, what="built"):
        assert lock_path(out).read_text().strip() == str(os.getpid())
        with pytest.raises(Busy, match=rf"{out} is being built by another run \(pid {os.getpid()}\)"):
            with exclusive(out, what="built"):
                pass
    assert not lock_path(out).exists()  # released: the lock file goes with it
    with exclusive(out):  # and the output can be taken again
        pass


def test_other_outputs_in_the_same_directory_do_not_block_each_other(tmp_path):
    with exclusive(tmp_path / "a"), exclusive(tmp_path / "b"):
        pass


def test_sweep_removes_what_killed_runs_left_and_nothing_else(tmp_path):
    out = tmp_path / "artifact"
    stale = [tmp_path / ".artifact.partial-123", tmp_path / ".artifact.old-9", tmp_path / ".artifact.staging-x"]
    for p in stale:
        (p / "sub").mkdir(parents=True)
        (p / "sub" / "model.onnx").write_bytes(b"half")
    (tmp_path / ".artifact.staging-file").write_text("a file, not a directory")
    keep = [tmp_path / ".other.partial-1", tmp_path / "artifact.partial-1", tmp_path / ".artifact.lock"]
    for p in keep:
        p.write_text("keep")
    removed = sweep(out)
    assert sorted(p.name for p in removed) == sorted([p.name for p in stale] + [".artifact.staging-file"])
    assert _beside(out) == sorted(p.name for p in keep)


def test_staged_then_placed_replaces_the_output_whole(tmp_path):
    out = tmp_path / "artifact"
    out.mkdir()
    (out / "old.txt").write_text("old")
    with staged(out) as staging:
        assert staging.parent == tmp_path and staging.name.startswith(".artifact.partial-")
        (staging / "new.txt").write_text("new")
        place(staging, out)
    assert sorted(os.listdir(out)) == ["new.txt"]
    assert _beside(out) == ["artifact"]  # no staging, no old copy, no lock


def test_a_failed_run_leaves_the_old_output_and_no_directories_it_made(tmp_path):
    out = tmp_path / "made" / "by" / "run" / "artifact"
    with pytest.raises(RuntimeError, match="the build failed"):
        with staged(out) as staging:
            (staging / "model.onnx").write_bytes(b"half")
            raise RuntimeError("the build failed")
    assert os.listdir(tmp_path) == []  # the parents this run created are gone again

    existing = tmp_path / "artifact"
    existing.mkdir()
    (existing / "readout.json").write_text("{}")
    with pytest.raises(RuntimeError):
        with staged(existing) as staging:
            (staging / "readout.json").write_text("half")
            raise RuntimeError("the build failed")
    assert (existing / "readout.json").read_text() == "{}" and _beside(existing) == ["artifact"]
