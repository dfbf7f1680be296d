"""Every example application runs against a built artifact of its family and prints typed results."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

APPS = Path(__file__).resolve().parents[2] / "examples" / "apps"


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
    """REAL MiniLM: of the built-in documents, the two cat sentences are nearest to the built-in cat query."""
    lines = run_app("embed.py", shared("embedding")[1]).splitlines()[1:3]
    assert all("cat" in line or "kitten" in line for line in lines)


def _demos() -> dict:
    import importlib.util

    spec = importlib.util.spec_from_file_location("demo_models", APPS.parent / "demo_models.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.DEMOS


def test_demo_models_cover_every_family_and_write_valid_manifests(tmp_path):
    from readout_export.build import validate
    from readout_sdk.families import REGISTRY

    assert set(_demos()) == set(REGISTRY)
    done = subprocess.run([sys.executable, str(APPS.parent / "demo_models.py"), "--out", str(tmp_path),
                           "--only", "regression", "--only", "sparse"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    manifests = [Path(line) for line in done.stdout.split()]
    assert [m.parent.name for m in manifests] == ["regression", "sparse"]
    for m in manifests:
        assert validate(m).family == m.parent.name


@pytest.mark.heavy
def test_every_demo_artifact_runs_its_app(docs_artifacts):
    """`python examples/demo_models.py --build` built one artifact per family; each family's app runs on it,
    with inputs from the command line, and prints one line per given input at least."""
    root = APPS.parent / "demo"
    inputs = {"embed.py": ["a query", "doc one", "doc two"], "classify.py": ["first text", "second text"],
              "tag.py": ["Ada Lovelace lived in London."], "answer.py": ["Who lived there?", "Ada lived in London."],
              "rerank.py": ["a query", "doc one", "doc two"], "late.py": ["a query", "doc one", "doc two"],
              "sparse.py": ["first text", "second text"], "choose.py": ["Pick one", "red", "blue", "green"]}
    for family, (_, _, app) in _demos().items():
        out = run_app(app, root / family / "artifact", *inputs[app])
        for text in inputs[app][1:] if app in ("embed.py", "rerank.py", "late.py") else []:
            assert text in out, (family, out)
        if app in ("classify.py", "sparse.py"):
            assert all(t in out for t in inputs[app]), (family, out)
        if app == "late.py":
            assert len(out.splitlines()) == 2  # one MaxSim score per document, nothing else


@pytest.mark.parametrize("app", sorted(p.name for p in APPS.glob("*.py") if not p.name.startswith("_")))
def test_every_app_has_help(app):
    done = subprocess.run([sys.executable, str(APPS / app), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "usage:" in done.stdout and "artifact" in done.stdout, done.stderr


def test_embed_app_ranks_the_documents_it_is_given(shared):
    out = run_app("embed.py", shared("embedding")[1], "Where does the cat sleep?", "A kitten naps on the rug.",
                  "Stocks fell sharply.")
    lines = out.splitlines()
    assert len(lines) == 3 and "kitten" in lines[1] and "Stocks" in lines[2]
    assert "Paris" not in out  # the built-in documents are not searched when documents are given


def test_apps_fail_in_one_line_without_a_traceback(shared, tmp_path):
    """No argument: argparse's usage; a wrong family, a missing directory: one `error:` line, status 2."""
    cases = [("embed.py", []), ("classify.py", [str(shared("embedding")[1]), "some text"]),
             ("tag.py", [str(tmp_path / "missing")]), ("choose.py", [str(shared("classify")[1])])]
    for app, args in cases:
        done = subprocess.run([sys.executable, str(APPS / app), *args], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, (app, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
        if args:
            assert done.stderr.startswith("error: ") and len(done.stderr.strip().splitlines()) == 1, done.stderr
    wrong = subprocess.run([sys.executable, str(APPS / "classify.py"), str(shared("embedding")[1]), "x"],
                           capture_output=True, text=True, timeout=120).stderr
    assert "embed" in wrong  # WrongCall names the call this artifact answers


def test_ci_examples_use_commands_and_options_that_exist():
    """examples/ci/*.yml: every `readout-export CMD --option` they run is a real command and option."""
    import re
    import shlex

    import yaml

    from readout_export.cli import main

    root = Path(__file__).resolve().parents[2] / "examples" / "ci"
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


def test_serving_client_has_help_and_fails_in_one_line_without_a_server():
    """examples/serving/client.py (docs/serving.md runs it against a real server): --help, and with nothing
    listening one `error:` line naming the address, status 2, after its --wait."""
    import socket

    client = APPS.parent / "serving" / "client.py"
    done = subprocess.run([sys.executable, str(client), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "usage:" in done.stdout and "--wait" in done.stdout, done.stderr
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = subprocess.run([sys.executable, str(client), "m", "hello", "--url", f"127.0.0.1:{port}", "--wait", "1"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("error: ") and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert f"127.0.0.1:{port}" in done.stderr and "not ready" in done.stderr


def test_answer_app_prints_one_answer_for_top_k_1(shared):
    """engine.answer returns one Answer for top_k=1 (a list otherwise); the app prints either."""
    one = run_app("answer.py", shared("qa")[1], "Who wrote it?", "Ada wrote the report in London.", "--top-k", "1")
    three = run_app("answer.py", shared("qa")[1], "Who wrote it?", "Ada wrote the report in London.", "--top-k", "3")
    assert len(one.splitlines()) == 1 and "score" in one
    assert len(three.splitlines()) == 3 and three.splitlines()[0] == one.splitlines()[0]  # best first


def _fails(app: str, *args: str) -> str:
    done = subprocess.run([sys.executable, str(APPS / app), *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "Traceback" not in done.stderr, (app, done.stdout, done.stderr)
    return done.stderr.strip().splitlines()[-1]


def test_apps_take_all_of_an_input_or_none_and_name_the_app_an_artifact_needs(shared):
    """Half an input (a question without its context, a query without documents) is refused rather than
    completed with built-in text the user never wrote; options may sit between the texts; an artifact of
    another family is refused naming the app that runs it."""
    qa, emb, cls = (str(shared(k)[1]) for k in ("qa", "embedding", "classify"))
    assert "give QUESTION and CONTEXT" in _fails("answer.py", qa, "Who wrote it?")
    assert "missing: DOCUMENT" in _fails("embed.py", emb, "just a query")
    assert "give an artifact directory" in _fails("tag.py")
    one = run_app("answer.py", Path(qa), "--top-k", "1", "Who wrote it?", "Ada wrote the report in London.")
    assert len(one.splitlines()) == 1 and "score" in one  # an option before the texts
    wrong = _fails("tag.py", emb, "some text")
    assert wrong.startswith("error: ") and "its family is embedding" in wrong and "examples/apps/embed.py" in wrong
    assert "--top-k applies to single-label" in _fails("classify.py", str(shared("regression")[1]), "x", "--top-k", "2")
    top = run_app("classify.py", Path(cls), "--top-k", "2", "a bright day")
    assert top.count("[") == 1 and top.split("[")[1].count(" 0.") + top.split("[")[1].count(" 1.") == 2


def test_regression_app_prints_each_named_value_of_the_typed_result(shared):
    """classify.py on a regression artifact prints ``name value`` per output, the values readout_sdk returns
    for the same text (the SDK called directly is the oracle), never the raw ``{'valence': ...}`` dict."""
    import readout_sdk

    art = shared("regression")[1]
    texts = ["I am thrilled.", "This is awful."]
    out = run_app("classify.py", art, *texts).splitlines()
    with readout_sdk.load(str(art)) as engine:
        expected = engine.classify(texts)
    assert len(out) == len(texts)
    for line, text, result in zip(out, texts, expected):
        assert isinstance(result, readout_sdk.Regression) and list(result.values) == ["valence", "arousal"]
        assert line.endswith(f"  {text}") and "{" not in line and "'" not in line, line
        shown = dict(part.rsplit(" ", 1) for part in line[:-len(text)].strip().split(", "))
        assert list(shown) == list(result.values)
        for name, value in result.values.items():
            assert abs(float(shown[name]) - value) <= 5e-4, (name, shown[name], value)


@pytest.mark.heavy
def test_the_plugin_example_runs_as_its_readme_says(tmp_path):
    """examples/plugins/README.md's block, as written, from the root of a copy of the example: its first line
    (pip install of the plugin) done as tests/families/test_plugins.py does it (pip, into a folder on
    PYTHONPATH: the shared environment never changes), the rest run by bash. REAL MiniLM backbone, seeded head.
    Oracles: the commands' exit status, and the artifact's readout.json (family, plugin, lifecycle)."""
    import os
    import shutil

    from helpers.docblocks import blocks
    from helpers.plugins import GEOMETRY, pip_install

    readme = GEOMETRY.parent / "README.md"
    [block] = [b for b in blocks(readme) if b.language == "bash"]
    install, *steps = block.code.strip().splitlines()
    assert install == "pip install ./examples/plugins/readout-geometry"
    root = tmp_path / "clone"
    shutil.copytree(GEOMETRY, root / "examples" / "plugins" / GEOMETRY.name,
                    ignore=shutil.ignore_patterns("models", "dist", "build", "*.egg-info", "__pycache__"))
    site = pip_install(GEOMETRY, tmp_path / "site")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p),
               PATH=os.pathsep.join((str(Path(sys.executable).parent), os.environ["PATH"])))
    done = subprocess.run(["bash", "-e", "-c", "\n".join(steps)], cwd=root, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    artifact = root / "examples" / "plugins" / GEOMETRY.name / "dist" / "geometry"
    record = json.loads((artifact / "readout.json").read_text())
    assert record["abi"]["family"] == "geometry" and record["abi"]["plugin"]["package"] == "readout-geometry"
    assert record["lifecycle"]["state"] == "RECONCILED"  # parity passed for this very release
