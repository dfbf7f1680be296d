"""The documentation cannot go stale: generated pages match what they describe, links resolve, and
every shell or Python block runs, or says why it cannot here (tests/helpers/docblocks.py: ``run``, ``setup``,
``skip: REASON``).

The runnable blocks run in the repository root, in file order, on the artifacts the docs tell a new
user to build (the `docs_artifacts` fixture runs the ``setup`` blocks): the REAL all-MiniLM-L6-v2 quick
start (examples/minilm/dist/minilm) and one SYNTHETIC demo artifact per family
(examples/demo/<family>/artifact). A block that starts a server in the background (``&``) has it
stopped by the block itself; whatever a failed block leaves running is killed with its process group.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from helpers.docblocks import DOCS, ROOT, code_blocks

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
RUNNABLE = [b for b in code_blocks() if b.mode == "run"]


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


@pytest.mark.heavy
@pytest.mark.parametrize("block", RUNNABLE, ids=[b.where for b in RUNNABLE])
def test_runnable_block(docs_artifacts, block):
    """The block runs as the docs show it (exit 0)."""
    import os
    import signal

    cmd = ["bash", "-euo", "pipefail", "-c", block.code] if block.language == "bash" else [sys.executable, "-c", block.code]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=docs_artifacts, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        try:  # anything the block started and left running (a server whose client failed)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    assert proc.returncode == 0, f"{block.where} failed:\n{(out or '')[-1500:]}\n{(err or '')[-2500:]}"


def test_every_shell_and_python_block_runs_or_says_why_not():
    """run, setup, server or "skip: REASON" on every bash/python fence (a bare ```bash is an example nobody runs)."""
    unmarked = [b.where for b in code_blocks() if b.mode not in ("run", "setup", "skip", "server") or
                (b.mode == "skip" and len(b.reason) < 10)]
    assert not unmarked, f"blocks that neither run nor say why not: {unmarked}"


def test_serving_guides_record_table_matches_the_registry():
    """docs/serving.md's table of request fields and result records: each family's row names exactly the
    registry's fields and record keys (what predict_records returns on every path)."""
    from readout_sdk.families import REGISTRY

    rows = {}
    for line in (ROOT / "docs" / "serving.md").read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] in REGISTRY:
            record = re.sub(r"\[.*?\]|\{.*?\}|\(.*?\)", "", cells[2])  # what a key holds, not a key
            rows[cells[0]] = (re.findall(r"`(\w+)`", cells[1]), re.findall(r"`(\w+)`", record))
    assert set(rows) == set(REGISTRY)
    for name, (fields, keys) in rows.items():
        assert tuple(fields) == REGISTRY[name].fields, name
        assert set(keys) == set(REGISTRY[name].record_keys), name


def test_there_are_runnable_blocks_in_the_guides():
    pages = {b.page.relative_to(ROOT).as_posix() for b in RUNNABLE}
    assert len(RUNNABLE) >= 8 and {"docs/quickstart.md", "docs/sdk.md", "docs/serving.md"} <= pages


def _heading_anchors(page) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    return {re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            for m in re.finditer(r"^#{1,6}\s+(.+)$", text, re.M)}


def test_relative_links_to_a_heading_name_one_that_exists():
    """`page.md#anchor` (and `#anchor` within a page) points at a heading of that page, so renaming a
    section cannot leave links to it dangling."""
    broken = []
    for page in DOCS:
        text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
        for target in LINK.findall(text):
            file, _, anchor = target.partition("#")
            if not anchor or re.match(r"^[a-z]+:", target):
                continue
            linked = (page.parent / file) if file else page
            if linked.suffix == ".md" and linked.exists() and anchor not in _heading_anchors(linked):
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, broken
