"""The documentation cannot go stale: generated pages match what they describe, links resolve, and
every code block marked runnable (a fence whose info string is ``bash run`` or ``python run``) runs.

The runnable blocks run in the repository root, in file order, on the artifacts the docs tell a new
user to build (the `docs_artifacts` fixture): the REAL all-MiniLM-L6-v2 quick start
(examples/minilm/dist/minilm) and one SYNTHETIC demo artifact per family (examples/demo/<family>/artifact).
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.S | re.M)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _blocks(path: Path) -> list[tuple[int, str, str]]:
    """(line, language, code) of every runnable block of ``path``."""
    text = path.read_text(encoding="utf-8")
    out = []
    for m in FENCE.finditer(text):
        words = m.group(1).split()
        if len(words) >= 2 and words[1] == "run" and words[0] in ("bash", "python"):
            out.append((text.count("\n", 0, m.start()) + 1, words[0], m.group(2)))
    return out


RUNNABLE = [(p, *b) for p in DOCS for b in _blocks(p)]


def test_generated_reference_pages_are_current():
    """docs/reference/ and docs/families/ are what docs/generate.py writes from the schema, the CLI and the
    family registry (a field, option or family added without regenerating fails here)."""
    done = subprocess.run([sys.executable, str(ROOT / "docs" / "generate.py"), "--check"], capture_output=True,
                          text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]


def test_every_manifest_field_is_described_and_every_family_has_a_page():
    from readout_sdk.families import REGISTRY

    schema = json.loads((ROOT / "abi_specs" / "manifest-1.schema.json").read_text())
    missing = []

    def walk(node: dict, path: str) -> None:
        for key, child in (node.get("properties") or {}).items():
            if not child.get("description"):
                missing.append(f"{path}.{key}")
            walk(child, f"{path}.{key}")
            if isinstance(child.get("items"), dict):
                walk(child["items"], f"{path}.{key}[]")
    walk(schema, "$")
    assert not missing, f"manifest fields without a description: {missing}"
    manifest = (ROOT / "docs" / "reference" / "manifest.md").read_text()
    for key in schema["properties"]:
        assert f"| `{key}`" in manifest
    for name in REGISTRY:
        page = (ROOT / "docs" / "families" / f"{name}.md").read_text()
        assert f"--only {name}" in page and f"`readout_sdk.{REGISTRY[name].result.__name__}`" in page


def test_cli_reference_lists_every_command_and_option():
    from readout_export.cli import main

    page = (ROOT / "docs" / "reference" / "cli.md").read_text()
    for name, cmd in main.commands.items():
        assert f"\n## {name}\n" in page
        section = page.split(f"\n## {name}\n", 1)[1].split("\n## ", 1)[0]
        for p in cmd.params:
            for opt in getattr(p, "opts", []):
                if opt.startswith("-"):
                    assert f"`{opt}`" in section, f"{name}: {opt} missing from docs/reference/cli.md"


def test_relative_links_resolve():
    broken = []
    for page in DOCS:
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            file = target.split("#", 1)[0]
            if file and not (page.parent / file).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken


def test_readme_is_a_page_with_the_ci_test_command_and_no_verdicts():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 120
    assert not re.search(r"\|\s*(PASS|FAIL)\s*\|", readme), "verdict tables belong in docs/performance.md"
    ci = (ROOT / ".ci" / "run").read_text()
    test_line = next(line for line in ci.splitlines() if "pytest" in line)
    assert test_line.strip() in readme, "the README's test command and .ci/run must stay in step"


@pytest.mark.parametrize("page,line,language,code", RUNNABLE,
                         ids=[f"{p.relative_to(ROOT)}:{line}" for p, line, _, _ in RUNNABLE])
def test_runnable_block(docs_artifacts, page, line, language, code):
    """The block at ``page``:``line`` runs as the docs show it (exit 0)."""
    cmd = ["bash", "-euo", "pipefail", "-c", code] if language == "bash" else [sys.executable, "-c", code]
    done = subprocess.run(cmd, cwd=ROOT, env=docs_artifacts, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"{page.relative_to(ROOT)}:{line} failed:\n{done.stdout[-1500:]}\n{done.stderr[-2500:]}"


def test_there_are_runnable_blocks_in_the_guides():
    pages = {p.relative_to(ROOT).as_posix() for p, *_ in RUNNABLE}
    assert len(RUNNABLE) >= 8 and {"docs/quickstart.md", "docs/sdk.md"} <= pages
