"""Shared fixtures: building artifacts from manifests, and a table of measured errors printed at
the end of the run (the numbers quoted in release notes come from here)."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing in the suite may reach a model hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# the split-role ledger of this run only (never the user's): `readout_eval.lineage`
os.environ["READOUT_EXPORT_LEDGER"] = __import__("tempfile").mkdtemp(prefix="readout-ledger-")
# compiled-model caches of this run only (never the user's ~/.cache): `readout_sdk.compiled_cache`
os.environ["READOUT_EXPORT_CACHE"] = __import__("tempfile").mkdtemp(prefix="readout-cache-")

from helpers.artifacts import linked_copy  # noqa: E402  (after the environment above)
from helpers.measured import INVALIDATION, MEASURED  # noqa: E402

def _invalidation_table(terminalreporter) -> None:
    caches = ("contextual_cache", "vector_cache", "raw_scores", "calibrated_scores", "decisions")
    terminalreporter.write_sep("-", "readout-export diff: changed layers and what they invalidate")
    terminalreporter.write_line(f"{'change':<52} {'layers changed':<16} " + " ".join(f"{c:<17}" for c in caches))
    for case, doc in INVALIDATION.items():
        changed = ",".join(k for k, v in doc["layers"].items() if v == "changed") or "-"
        terminalreporter.write_line(f"{case:<52} {changed:<16} " + " ".join(
            f"{'invalidate' if doc['invalidates'][c] else 'reusable':<17}" for c in caches))


def pytest_terminal_summary(terminalreporter):
    if INVALIDATION:
        _invalidation_table(terminalreporter)
    if not MEASURED:
        return
    terminalreporter.write_sep("-", "largest |graph - eager PyTorch| per case (left/right padding, batch 1/2/7)")
    for case in sorted(MEASURED):
        value, note = MEASURED[case]
        terminalreporter.write_line(f"{case:58s} {value:.2e}  {note}")
    out = os.environ.get("READOUT_ERRORS_JSON")
    if out:
        Path(out).write_text(json.dumps({k: v[0] for k, v in MEASURED.items()}, indent=2))


@pytest.fixture
def build_artifact(tmp_path):
    """Write a manifest into tmp_path and build it; returns the artifact directory."""
    from readout_export.build import build

    def _build(manifest: dict, name: str = "manifest.json", force: bool = False) -> Path:
        doc = {"schema": "readout-export/manifest/1", "output_dir": "artifact", **manifest}
        path = tmp_path / name
        path.write_text(json.dumps(doc))
        return build(path, force=force).output_dir

    return _build


@pytest.fixture(scope="session")
def docs_artifacts(shared):
    """What the docs tell a new user to make first, made the way they say; returns the environment their
    commands run in. The docs' ``setup`` blocks run as shown, in page order (tests/helpers/docblocks.py): the
    MiniLM example's prepare.py and `python examples/demo_models.py --build` (one SYNTHETIC artifact per
    family under examples/demo/<family>/artifact). The quick start's MiniLM build itself is not rerun:
    examples/minilm/dist/minilm is the session's REAL MiniLM artifact (the shared "embedding" one: the
    quick-start manifest's targets and max_length), its graphs hard-linked."""
    import shutil
    import subprocess
    import tempfile

    from helpers.docblocks import code_blocks

    root = Path(__file__).resolve().parents[1]
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
           # what the docs' commands keep between runs (serve's Triton log) stays out of the tester's home
           "XDG_STATE_HOME": tempfile.mkdtemp(prefix="readout-docs-state-")}
    minilm = root / "examples" / "minilm" / "dist" / "minilm"
    shutil.rmtree(minilm, ignore_errors=True)
    minilm.parent.mkdir(parents=True, exist_ok=True)
    linked_copy(shared("embedding")[1], minilm)
    setup = [b for b in code_blocks() if b.mode == "setup"]
    assert setup, "the docs have no setup blocks: the fixture would make nothing the run blocks use"
    for block in setup:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", block.code], cwd=root, env=env,
                              capture_output=True, text=True, timeout=1200)
        assert done.returncode == 0, f"{block.where} failed:\n{done.stderr[-2000:]}"
    return env


@pytest.fixture(scope="session")
def shared(tmp_path_factory):
    """shared(key) -> (model_dir, artifact_dir), built once per session (see tests/helpers/sdk_fixtures.py)."""
    from helpers.sdk_fixtures import build_shared

    cache: dict = {}

    def get(key: str):
        if key not in cache:
            cache[key] = build_shared(key, tmp_path_factory.mktemp(key))
        return cache[key]

    return get


@pytest.fixture(scope="session")
def shared_qa(shared):
    """An engine over the windowed QA artifact (max_length 48)."""
    import readout_sdk

    return readout_sdk.load(shared("qa")[1])
