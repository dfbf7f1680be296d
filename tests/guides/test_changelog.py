"""CHANGELOG.md keeps the Keep a Changelog 1.1.0 shape (https://keepachangelog.com/en/1.1.0/).

The rules, checked by `problems` on the file's text: the title ``# Changelog`` and a preamble naming the format
and Semantic Versioning; ``## [Unreleased]`` first; every other section ``## [VERSION] - YYYY-MM-DD`` with a
real date, versions strictly descending (PEP 440 order: ``0.1.0.dev6`` after ``0.1.0``) and dates never
ascending, none newer than pyproject.toml's version; inside a section only the six subsections ``### Added``,
``Changed``, ``Deprecated``, ``Removed``, ``Fixed``, ``Security``, each at most once, in that order, each with at
least one ``- `` entry and nothing but entries; link reference definitions, if any, all at the bottom and each
naming a section; no placeholder words. The checker is itself tested on broken copies of the real file, so a
rule that stopped catching its case fails here too.
"""
from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable

import pytest
from packaging.version import InvalidVersion, Version

from helpers.docblocks import ROOT

CHANGELOG = ROOT / "CHANGELOG.md"
SUBSECTIONS = ("Added", "Changed", "Deprecated", "Removed", "Fixed", "Security")
VERSION = re.compile(r"^## \[(?P<label>[^\]]+)\]( - (?P<date>\d{4}-\d{2}-\d{2}))?$")
LINK_REF = re.compile(r"^\[(?P<label>[^\]]+)\]: \S+$")
PLACEHOLDER = re.compile(r"\b(TODO|TBD|FIXME|XXX)\b")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _project_version() -> Version:
    found = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert found, "pyproject.toml has no version line"
    return Version(found.group(1))


def _head(lines: list[str]) -> list[str]:
    """The title and the preamble before the first section."""
    out = []
    if not lines or lines[0] != "# Changelog":
        out.append("line 1 must be the title '# Changelog'")
    first_section = next((i for i, x in enumerate(lines) if x.startswith("## ")), len(lines))
    preamble = "\n".join(lines[1:first_section])
    for needed in ("keepachangelog.com/en/1.1.0", "semver.org"):
        if needed not in preamble:
            out.append(f"the preamble must link {needed}")
    return out


def _section_heading(line: str, n: int, first: bool, seen: list[tuple[Version, dt.date]],
                     project: Version) -> list[str]:
    """One ``## `` line: Unreleased first and only there, then dated versions, newest first."""
    m = VERSION.match(line)
    if not m:
        return [f"line {n}: a section heading is '## [Unreleased]' or '## [VERSION] - YYYY-MM-DD': {line!r}"]
    label, date = m.group("label"), m.group("date")
    if first or label == "Unreleased":
        ok = first and label == "Unreleased" and date is None
        return [] if ok else [f"line {n}: the first section, and only it, is '## [Unreleased]' (undated)"]
    if date is None:
        return [f"line {n}: {label} has no date"]
    try:
        version = Version(label)
    except InvalidVersion:
        return [f"line {n}: {label!r} is not a version"]
    try:
        day = dt.date.fromisoformat(date)
    except ValueError:
        return [f"line {n}: {date!r} is not a date"]
    out = []
    if seen and not version < seen[-1][0]:
        out.append(f"line {n}: {label} must be older than the section above it")
    if seen and day > seen[-1][1]:
        out.append(f"line {n}: {date} is later than the section above it (newest first)")
    if version > project:
        out.append(f"line {n}: {label} is newer than pyproject.toml's version {project}")
    seen.append((version, day))
    return out


def _subsection(name: str, n: int, names: list[str]) -> list[str]:
    """A ``### `` line: one of the six, once per section, in Keep a Changelog's order."""
    if name not in SUBSECTIONS:
        return [f"line {n}: '### {name}' is not one of {', '.join(SUBSECTIONS)}"]
    if name in names:
        return [f"line {n}: '### {name}' twice in one section"]
    earlier = [x for x in names if x in SUBSECTIONS]
    if earlier and SUBSECTIONS.index(name) < SUBSECTIONS.index(earlier[-1]):
        return [f"line {n}: '### {name}' must come before '### {earlier[-1]}'"]
    return []


def _body(lines: list[tuple[int, str]]) -> tuple[list[str], bool]:
    """The lines under one ``## `` heading: subsections, none empty, nothing but entries. Also: has one?"""
    out: list[str] = []
    names: list[str] = []
    current: tuple[int, str, int] | None = None  # the open subsection: line, name, entries so far
    for n, line in lines:
        if line.startswith("### "):
            if current and not current[2]:
                out.append(f"line {current[0]}: '### {current[1]}' has no entry")
            name = line[4:].strip()
            out += _subsection(name, n, names)
            names.append(name)
            current = (n, name, 0)
        elif line.startswith("- ") and current:
            current = (current[0], current[1], current[2] + 1)
        elif line.strip() and not (line.startswith("  ") and current and current[2]):
            out.append(f"line {n}: only '- ' entries (continued by indented lines) belong in a section: {line!r}")
    if current and not current[2]:
        out.append(f"line {current[0]}: '### {current[1]}' has no entry")
    return out, bool(names)


def problems(text: str, project: Version) -> list[str]:
    """Every way ``text`` departs from the changelog format (empty: it keeps it)."""
    lines = text.splitlines()
    out = _head(lines)
    refs = [i for i, line in enumerate(lines) if LINK_REF.match(line)]
    if refs and any(x.strip() and i not in refs for i, x in enumerate(lines[refs[0]:], refs[0])):
        out.append(f"line {refs[0] + 1}: link reference definitions belong together at the bottom")
    labels = {m.group("label") for x in lines if (m := VERSION.match(x))}
    out += [f"line {i + 1}: a link reference to no section" for i in refs
            if LINK_REF.match(lines[i]).group("label") not in labels]
    out += [f"line {i + 1}: placeholder {m.group(0)}" for i, x in enumerate(lines) if (m := PLACEHOLDER.search(x))]
    out += [f"line {i + 1}: only '#', '##' and '###' headings" for i, x in enumerate(lines)
            if i and x.startswith("#") and not x.startswith(("## ", "### "))]
    starts = [i for i, x in enumerate(lines) if x.startswith("## ")]
    if not starts:
        return out + ["no sections: '## [Unreleased]' at least"]
    seen: list[tuple[Version, dt.date]] = []
    body_end = refs[0] if refs else len(lines)
    for k, start in enumerate(starts):
        out += _section_heading(lines[start], start + 1, k == 0, seen, project)
        end = starts[k + 1] if k + 1 < len(starts) else body_end
        found, has_subsection = _body([(i + 1, lines[i]) for i in range(start + 1, end)])
        out += found
        if k and not has_subsection:
            out.append(f"line {start + 1}: a dated section needs at least one subsection")
    return out


def test_changelog_keeps_the_format():
    text = CHANGELOG.read_text(encoding="utf-8")
    assert problems(text, _project_version()) == []
    assert "## [Unreleased]" in text  # and it is the first section (problems checks the order)


def test_changelog_relative_links_resolve():
    """The docs link check covers README.md and docs/; this covers the changelog."""
    broken = [t for t in LINK.findall(CHANGELOG.read_text(encoding="utf-8"))
              if not re.match(r"^[a-z]+:", t) and not t.startswith("#")
              and not (ROOT / t.split("#", 1)[0]).exists()]
    assert not broken, broken


def _dated(text: str) -> list[re.Match[str]]:
    return list(re.finditer(r"^## \[(?!Unreleased)([^\]]+)\] - (\d{4}-\d{2}-\d{2})$", text, re.M))


def _second_dated_after_first(text: str) -> str:
    """The second dated section a day later than the first (dates ascending)."""
    a, b = _dated(text)[:2]
    later = (dt.date.fromisoformat(a.group(2)) + dt.timedelta(days=1)).isoformat()
    return text[:b.start(2)] + later + text[b.end(2):]


def _unreleased_last(text: str) -> str:
    head, rest = text.split("## [Unreleased]", 1)
    unreleased, after = rest.split("\n## [", 1)
    return head + "## [" + after.rstrip("\n") + "\n\n## [Unreleased]" + unreleased


def _oldest_emptied(text: str) -> str:
    return text[:_dated(text)[-1].end()] + "\n"


# each broken copy of the real file, and the words of the problem it must raise
BROKEN: dict[str, tuple[Callable[[str], str], str]] = {
    "title": (lambda t: t.replace("# Changelog", "# Release notes", 1), "title"),
    "preamble without the format": (lambda t: t.replace("keepachangelog.com/en/1.1.0", "example.com", 1),
                                    "keepachangelog"),
    "Unreleased not first": (_unreleased_last, "first section"),
    "undated version": (lambda t: t.replace(_dated(t)[0].group(0), f"## [{_dated(t)[0].group(1)}]", 1),
                        "has no date"),
    "dates ascending": (_second_dated_after_first, "later than the section above"),
    "impossible date": (lambda t: t.replace(_dated(t)[0].group(0), _dated(t)[0].group(0)[:-5] + "13-01", 1),
                        "is not a date"),
    "versions not descending": (lambda t: t.replace(f"[{_dated(t)[1].group(1)}]", f"[{_dated(t)[0].group(1)}]", 1),
                                "must be older"),
    "not a version": (lambda t: t.replace(f"[{_dated(t)[0].group(1)}]", "[next one]", 1), "is not a version"),
    "version newer than pyproject": (lambda t: t.replace(f"[{_dated(t)[0].group(1)}]", "[99.0.0]", 1),
                                     "newer than pyproject"),
    "unknown subsection": (lambda t: t.replace("### Added", "### Improved", 1), "is not one of"),
    "empty subsection": (lambda t: t.rstrip("\n") + "\n\n### Security\n", "has no entry"),
    "subsection twice": (lambda t: t.replace("### Added\n", "### Added\n\n- one\n\n### Added\n", 1), "twice"),
    "subsections out of order": (lambda t: t.replace("### Added\n", "### Security\n\n- one\n\n### Added\n", 1),
                                 "must come before"),
    "loose text in a section": (lambda t: t.replace("### Added\n", "### Added\n\nSome prose.\n", 1),
                                "only '- ' entries"),
    "deeper heading": (lambda t: t.replace("### Added\n", "### Added\n\n#### Details\n", 1),
                       "only '#', '##' and '###'"),
    "dated section without subsections": (_oldest_emptied, "needs at least one subsection"),
    "link reference not at the bottom": (lambda t: t.replace("## [Unreleased]\n", "## [Unreleased]\n\n"
                                                             "[Unreleased]: https://example.com/x\n", 1),
                                         "at the bottom"),
    "link reference to no section": (lambda t: t.rstrip("\n") + "\n\n[9.9.9]: https://example.com/x\n",
                                     "to no section"),
    "placeholder": (lambda t: t.replace("### Added\n\n- ", "### Added\n\n- TODO ", 1), "placeholder"),
}


@pytest.mark.parametrize("name", BROKEN)
def test_the_checker_refuses_a_broken_changelog(name):
    """Each broken copy of the real file differs from it and is refused by the rule it breaks."""
    text = CHANGELOG.read_text(encoding="utf-8")
    mutate, words = BROKEN[name]
    broken = mutate(text)
    assert broken != text
    found = problems(broken, _project_version())
    assert any(words in p for p in found), found


def test_a_link_reference_block_at_the_bottom_is_allowed():
    text = CHANGELOG.read_text(encoding="utf-8").rstrip("\n")
    label = _dated(text)[0].group(1)
    assert problems(text + f"\n\n[Unreleased]: https://example.com/a\n[{label}]: https://example.com/b\n",
                    _project_version()) == []
