"""The code blocks of the user docs, by what the suite does with each (the fence's info string says it).

Every ``bash`` or ``python`` block of the docs carries one of:

- ``run``: the docs test runs it as shown, in the repository root, in file order (tests/guides/test_docs.py);
- ``setup``: the docs fixture runs it as shown before any ``run`` block, in file order (it is how a new
  user makes the artifacts the ``run`` blocks use: tests/conftest.py ``docs_artifacts``);
- ``server``: an HTTP client example; tests/serving/test_http.py runs it as shown against a live
  ``readout-export serve-http`` (its address and key in place of ``http://127.0.0.1:8080`` and
  ``my-secret-key``);
- ``skip: REASON``: not run here, and REASON says why (it installs packages, needs a GPU, a running
  server or a cluster, or another test runs the same thing) — shown in the page's source only.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
# a fence may be indented (inside a list item); it closes with the same indentation
FENCE = re.compile(r"^([ \t]*)```([^\n`]*)\n(.*?)^\1```[ \t]*$", re.S | re.M)


@dataclass(frozen=True)
class Block:
    page: Path
    line: int         # 1-based line of the opening fence
    language: str     # the first word of the info string ("bash", "python", "json", "" ...)
    mode: str         # "run", "setup", "skip" or "" (no word after the language)
    reason: str       # after "skip:"
    code: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """Every fenced block of ``path``, its indentation removed."""
    text = path.read_text(encoding="utf-8")
    out = []
    for m in FENCE.finditer(text):
        indent, info, body = m.group(1), m.group(2).strip(), m.group(3)
        language, _, rest = info.partition(" ")
        rest = rest.strip()
        mode, _, reason = rest.partition(":") if rest.startswith("skip") else (rest, "", "")
        code = "".join(line[len(indent):] if line.startswith(indent) else line
                       for line in body.splitlines(keepends=True))
        out.append(Block(path, text.count("\n", 0, m.start()) + 1, language, mode.strip(), reason.strip(), code))
    return out


def every_block() -> list[Block]:
    return [b for p in DOCS for b in blocks(p)]


def code_blocks() -> list[Block]:
    """The shell and Python blocks: each must say run, setup or skip."""
    return [b for b in every_block() if b.language in ("bash", "sh", "shell", "python", "console")]
