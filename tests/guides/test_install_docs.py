"""The docs' install lines work as written: readout-export is on no package index, so every `pip install` of it
names a clone (`-e .`, a directory) or a built wheel; a block that needs an extra the quick start leaves out
installs it; the GPU page says where its figures were measured and how to swap the CPU wheel for the GPU one.

Oracles: pyproject.toml (the distribution's name, version and base dependencies) and the docs' own blocks
(tests/helpers/docblocks.py), never the prose around them.
"""
from __future__ import annotations

import re
import shlex
import tomllib

import pytest

from helpers.docblocks import DOCS, ROOT, blocks

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# the distribution by name, as an index would resolve it: readout-export, readout_export[cpu], readout-export==0.1
BY_NAME = re.compile(r"^readout[-_.]export(\[[^\]]*\])?\s*([<>=!~].*)?$", re.I)
PIP_INSTALL = re.compile(r"pip install ((?:[^`\n\\]|\\\n)*)")
EXTRAS = re.compile(r"\[([a-z0-9_,\- ]+)\]")


def _targets(command: str) -> list[str]:
    """The words of one `pip install ...` up to where the shell command ends (&&, ;, |, a comment)."""
    command = re.split(r"&&|;|\|| #", command.replace("\\\n", " "), maxsplit=1)[0]
    try:
        return shlex.split(command)
    except ValueError:  # prose cut mid-quote: the words as written
        return command.split()


def _paragraph(text: str, at: int) -> str:
    start = text.rfind("\n\n", 0, at)
    end = text.find("\n\n", at)
    return text[start + 1: end if end >= 0 else len(text)]


def _installs(text: str) -> list[tuple[int, list[str]]]:
    return [(m.start(), _targets(m.group(1))) for m in PIP_INSTALL.finditer(text)]


def _page_param(page):
    return pytest.param(page, id=page.relative_to(ROOT).as_posix())


@pytest.mark.parametrize("page", [_page_param(p) for p in DOCS])
def test_no_doc_installs_readout_export_by_name_from_an_index(page):
    """`pip install 'readout-export[cpu]'` finds nothing on PyPI: a clone (`-e .`, `./readout-export`) or a
    wheel (`dist/readout_export-...whl`) instead, unless the paragraph says it is not on PyPI."""
    assert PYPROJECT["name"] == "readout-export"
    text = page.read_text(encoding="utf-8")
    by_name = [f"line {text.count(chr(10), 0, at) + 1}: {' '.join(w for w in words if BY_NAME.match(w))}"
               for at, words in _installs(text)
               if any(BY_NAME.match(w) for w in words) and "not on PyPI" not in _paragraph(text, at)]
    assert not by_name, "installs of readout-export by name (no index has it): " + "; ".join(by_name)


def test_wheels_the_docs_install_are_the_ones_a_build_writes():
    """A wheel path names this version's pure-Python wheel (`pip wheel .` writes readout_export-V-py3-none-any)."""
    wheel = f"readout_export-{PYPROJECT['version']}-py3-none-any.whl"
    named = {w for page in DOCS for w in re.findall(r"readout_export-[^\s\[`'\"]*\.whl", page.read_text())}
    assert named and named <= {wheel, f"dist/{wheel}"}, named


def test_an_app_server_install_is_the_sdk_wheel_without_torch():
    """docs/extras.md shows the app-server install: the wheel with `cpu` or `gpu` and no `export`; the base
    dependencies it pulls exclude torch and transformers (pyproject.toml is the oracle)."""
    heavy = {"torch", "transformers", "onnx", "onnxscript"}
    assert not {re.split(r"[<>=!~\[; ]", d)[0].lower() for d in PYPROJECT["dependencies"]} & heavy
    assert "torch" in " ".join(PYPROJECT["optional-dependencies"]["export"])  # the oracle knows where torch is
    server = [words for b in blocks(ROOT / "docs" / "extras.md") if "app server" in b.code
              for _, words in _installs(b.code)]
    assert server, "docs/extras.md has no app-server install block"
    for words in server:
        wheels = [w for w in words if ".whl" in w]
        assert wheels, words
        extras = set(",".join(EXTRAS.findall(" ".join(wheels))).replace(" ", "").split(","))
        assert extras in ({"cpu"}, {"gpu"}), extras


def _extras(code: str) -> set[str]:
    """The extras every `pip install` of ``code`` names (``-e ".[cpu,eval]"`` gives cpu and eval)."""
    return {e.strip() for _, words in _installs(code) for w in words for group in EXTRAS.findall(w)
            for e in group.split(",")}


def test_blocks_that_evaluate_or_calibrate_install_the_eval_extra_first():
    """The quick start's install has no `eval`; a runnable block that runs `evaluate` or `calibrate` installs
    the extra itself, or an earlier block of its page does (a reader runs blocks, not prose)."""
    quickstart = next(b for b in blocks(ROOT / "docs" / "quickstart.md") if "pip install" in b.code)
    assert "cpu" in _extras(quickstart.code) and "eval" not in _extras(quickstart.code)
    missing = []
    for page in DOCS:
        so_far = ""
        for b in blocks(page):
            so_far += b.code
            if b.mode in ("run", "setup") and re.search(r"readout-export (evaluate|calibrate)\b", b.code) \
                    and "eval" not in _extras(so_far):
                missing.append(b.where)
    assert not missing, f"blocks that run evaluate/calibrate without installing the eval extra: {missing}"


def test_gpu_page_says_where_each_figure_was_measured_and_how_to_swap_the_wheel():
    """Every paragraph of docs/gpu.md that quotes the H200 names the run it came from (issue 32's report);
    the page has a block that uninstalls onnxruntime before installing the `gpu` extra, then lists providers."""
    text = (ROOT / "docs" / "gpu.md").read_text()
    unsourced = [p.strip()[:80] for p in re.split(r"\n\s*\n", text) if "H200" in p and "issue 32" not in p]
    assert not unsourced, f"H200 figures without their source: {unsourced}"
    swap = [b for b in blocks(ROOT / "docs" / "gpu.md") if "pip uninstall" in b.code]
    assert swap, "docs/gpu.md has no block switching [cpu] to [gpu]"
    code = swap[0].code
    uninstall = re.search(r"pip uninstall -y onnxruntime(\s|$)", code)
    gpu = re.search(r"pip install [^\n]*\[[^\]]*\bgpu\b", code)
    assert uninstall and gpu and uninstall.start() < gpu.start(), code
    assert "get_available_providers()" in code[gpu.start():], code
