"""Every example application runs against a built artifact of its family and prints typed results."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

APPS = Path(__file__).resolve().parents[1] / "examples" / "apps"


def run_app(app: str, artifact: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, str(APPS / app), str(artifact), *args], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.mark.parametrize("app,key,expect", [
    ("embed.py", "embedding", "cosine similarity"),
    ("classify.py", "classify", "probability"),
    ("classify.py", "multilabel", "day"),
    ("classify.py", "regression", "valence"),
    ("tag.py", "tag-bert", "entities"),
    ("answer.py", "qa", "score"),
    ("rerank.py", "cross", "#"),
    ("sparse.py", "sparse", "nonzero terms"),
    ("choose.py", "choice", "chose #"),
])
def test_example_app(shared, app, key, expect):
    out = run_app(app, shared(key)[1], *(["a bright day"] if app == "classify.py" else []))
    assert expect in out


def test_embed_app_ranks_the_cat_sentences_first(shared):
    """REAL MiniLM: the two cat sentences are nearest to a cat query."""
    lines = run_app("embed.py", shared("embedding")[1]).splitlines()[1:3]
    assert all("cat" in line or "kitten" in line for line in lines)


def test_late_app(tmp_path, build_artifact):
    from test_families import _late_model

    artifact = build_artifact({"model": str(_late_model(tmp_path)), "family": "late_interaction"})
    assert len(run_app("late.py", artifact).splitlines()) == 3


def test_demo_models_script_writes_buildable_manifests(tmp_path):
    from readout_export.build import validate

    done = subprocess.run([sys.executable, str(APPS.parent / "demo_models.py")], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    manifests = [Path(line) for line in done.stdout.split()]
    assert len(manifests) == 5
    for m in manifests:
        assert validate(m).family


def test_ci_examples_use_commands_and_options_that_exist():
    """examples/ci/*.yml: every `readout-export CMD --option` they run is a real command and option."""
    import re
    import shlex

    import yaml

    from readout_export.cli import main

    root = Path(__file__).resolve().parent.parent / "examples" / "ci"
    seen = 0
    for path in sorted(root.glob("*.yml")):
        text = json.dumps(yaml.safe_load(path.read_text()))  # every string in the file, folded lines joined
        for m in re.finditer(r"readout-export ([a-z]+)([^\"\\]*)", text):
            cmd = main.commands.get(m.group(1))
            assert cmd is not None, f"{path.name}: no command {m.group(1)!r}"
            known = {o for p in cmd.params for o in p.opts}
            for word in shlex.split(m.group(2)):
                if word.startswith("--"):
                    assert word in known, f"{path.name}: {m.group(1)} has no option {word}"
            seen += 1
    assert seen >= 8
