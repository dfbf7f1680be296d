"""A seeded sweep of build destinations (issue 35: "0 files lost"): generated output_dir states (empty, an
artifact, an artifact with a user's file or folder in it, a folder holding some readout.json, a file, a link
to any of these, a dangling link) each met by `validate` and `build --force`.

For every case: each command exits 0 or 2 (never 1, never a traceback) with at most one error line; no
file that was there before and is not the replaced artifact's own changes or disappears; nothing appears
outside the destination; and validate's verdict is build's. CI-sized by default, ``-m fuzz`` for more.
Model: SYNTHETIC tiny BERT embedding (built once per module)."""
from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from helpers import synthetic
from readout_export.cli import main

CASES = 10
FUZZ_CASES = 80
KINDS = ["missing", "empty", "artifact", "artifact+file", "artifact+dir", "bare_readout_json", "file",
         "link_to_artifact", "link_to_user_dir", "dangling_link"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("dest")
    synthetic.make_model("bert", "embedding", root / "model")
    manifest = {"schema": "readout-export/manifest/1", "model": str(root / "model"), "family": "embedding",
                "output_dir": str(root / "artifact"), "name": "tiny", "readout": {"pooling": "mean"}}
    (root / "m.json").write_text(json.dumps(manifest))
    result = CliRunner().invoke(main, ["build", str(root / "m.json")])
    assert result.exit_code == 0, result.output
    return root


def _snapshot(root: Path) -> dict[str, bytes | str]:
    """Every file and link under ``root`` (links by target, not followed)."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            if p.is_symlink():
                out[str(p.relative_to(root))] = "-> " + os.readlink(p)
            elif p.is_file():
                out[str(p.relative_to(root))] = p.read_bytes()
    return out


def _make(kind: str, where: Path, built: Path, rng) -> Path:
    """Create destination state ``kind`` at ``where/out``; return the output_dir the manifest names."""
    out = where / "out"
    user = where / "user"
    user.mkdir()
    (user / "precious.txt").write_text(f"mine {rng.integers(1000)}")
    if kind == "empty":
        out.mkdir()
    elif kind.startswith("artifact"):
        shutil.copytree(built / "artifact", out)
        if kind == "artifact+file":
            (out / f"notes-{rng.integers(100)}.txt").write_text("mine")
        elif kind == "artifact+dir":
            (out / "mine").mkdir()
            (out / "mine" / "a.txt").write_text("mine")
    elif kind == "bare_readout_json":
        out.mkdir()
        (out / "readout.json").write_text('{"not": "an artifact"}')
        (out / "precious.txt").write_text("mine")
    elif kind == "file":
        out.write_text("a file of mine")
    elif kind == "link_to_artifact":
        shutil.copytree(built / "artifact", where / "real")
        out.symlink_to(where / "real")
    elif kind == "link_to_user_dir":
        out.symlink_to(user)
    elif kind == "dangling_link":
        out.symlink_to(where / "nowhere" / "deeper")
    return out


def _run(args: list[str]) -> tuple[int, str]:
    result = CliRunner().invoke(main, args)
    return result.exit_code, result.output


def _sweep(built: Path, tmp_path: Path, cases: int, seed: int) -> Counter:
    rng = np.random.default_rng(seed)
    table: Counter = Counter()
    problems = []
    kinds = [KINDS[i % len(KINDS)] for i in range(cases)]  # every kind at least once, then at random
    kinds = kinds[:len(KINDS)] + [KINDS[int(rng.integers(len(KINDS)))] for _ in kinds[len(KINDS):]]
    for i, kind in enumerate(kinds):
        where = tmp_path / f"case{i}"
        where.mkdir()
        out = _make(kind, where, built, rng)
        manifest = json.loads((built / "m.json").read_text()) | {"output_dir": str(out)}
        (where / "m.json").write_text(json.dumps(manifest))
        before = _snapshot(where)
        # what the build may replace: the artifact's own files at the destination (a link's target's included)
        replaceable = {k for k in before if k.startswith(("out/", "real/")) and kind in ("artifact", "link_to_artifact")}
        v_code, v_out = _run(["validate", str(where / "m.json")])
        b_code, b_out = _run(["build", str(where / "m.json"), "--force"])
        after = _snapshot(where)
        lost = [k for k, v in before.items() if k not in replaceable and after.get(k) != v]
        outside = [p for p in (Path("/nowhere"), where.parent / "nowhere") if p.exists()]
        table[(kind, "built" if b_code == 0 else "refused")] += 1
        for name, code, text in (("validate", v_code, v_out), ("build", b_code, b_out)):
            if code not in (0, 2) or "Traceback" in text or text.count("error:") > 1:
                problems.append(f"{kind}: {name} exit {code}: {text[-300:]}")
        if (v_code == 0) != (b_code == 0):
            problems.append(f"{kind}: validate exit {v_code} but build exit {b_code}: {b_out[-200:]}")
        if lost or outside:
            problems.append(f"{kind}: lost {lost} / created outside {outside}")
        shutil.rmtree(where, ignore_errors=True)
    print(f"\ndestination sweep, {cases} cases (seed {seed}):")
    for (kind, outcome), n in sorted(table.items()):
        print(f"  {kind:<18} {outcome:<8} {n}")
    assert not problems, "\n".join(problems)
    return table


@pytest.mark.heavy
def test_destination_sweep_loses_no_file(built, tmp_path):
    table = _sweep(built, tmp_path, CASES, seed=35)
    for kind in ("artifact+file", "artifact+dir", "bare_readout_json", "file", "link_to_user_dir"):
        assert table[(kind, "built")] == 0, kind  # what holds a user's file is never replaced


@pytest.mark.fuzz
def test_destination_sweep_fuzz(built, tmp_path):
    _sweep(built, tmp_path, FUZZ_CASES, seed=3535)
