"""The parity evidence an artifact keeps (``parity.json``), read once and the same way for every use:
the lifecycle (per target), the default load (per target x backend, with the worst value of each
metric), and `diff` (per target, on each side).

Only evidence for *this* release counts, and only for a target whose graph is still the one parity
evaluated (``target_files``): a rebuilt release or a replaced engine is not proven by old checks. A kept
report counts only while readout.json lists it with its sha256 (:func:`read_kept`): a report edited,
replaced or dropped in afterwards is ignored (and `inspect` says so), never trusted.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

PARITY_FILE = "parity.json"
RECONCILIATION = "reconciliation"  # the parity checks' target name for reconciliation
# readout.json key -> the kept report it lists (with the report's sha256)
KEPT_FILES = {"parity": PARITY_FILE, "evaluation": "evaluation.json", "bench": "bench.json",
              "compatibility": "compatibility.json"}
WHY_IGNORED = {"not listed": "not listed in readout.json", "changed": "changed after readout.json listed it",
               "malformed": "listed in readout.json but not a JSON object"}


def pending_path(root: Path, key: str) -> Path:
    """Where a kept report waits while readout.json is switched to list it (`lifecycle.keep`): between
    that switch and the rename that follows, the listed bytes are here, and readers look here too."""
    return root / f".{KEPT_FILES[key]}.pending"


def listed_sha(listing: Mapping[str, Any], key: str) -> str | None:
    """The sha256 readout.json (``listing``) lists for kept report ``key``, or None."""
    entry = listing.get(key)
    sha = entry.get("sha256") if isinstance(entry, Mapping) else None
    return sha if isinstance(sha, str) else None


def _listed_bytes(root: Path, key: str, listing: Mapping[str, Any]) -> bytes | None:
    """The bytes of kept report ``key`` that readout.json lists: the report file's, or, while a keep is
    between its two steps (or was killed there), its pending file's. None when neither matches."""
    sha = listed_sha(listing, key)
    if sha is None:
        return None
    for path in (root / KEPT_FILES[key], pending_path(root, key)):
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if hashlib.sha256(data).hexdigest() == sha:
            return data
    return None


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from ``path``, or None when it is missing, unreadable or not an object."""
    try:
        return _object(path.read_bytes())
    except OSError:
        return None


def _object(data: bytes) -> dict[str, Any] | None:
    try:
        doc = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    return doc if isinstance(doc, dict) else None


def kept_status(root: Path, key: str, listing: Mapping[str, Any]) -> str:
    """Whether the kept report ``key`` is the one readout.json (``listing``) lists: "listed", "absent",
    "not listed" (a file readout.json does not name), "changed" (its sha256 differs) or "malformed" (the
    listed bytes are not a JSON object: ignored, never a crash)."""
    data = _listed_bytes(root, key, listing)
    if data is not None:
        return "listed" if _object(data) is not None else "malformed"
    if not (root / KEPT_FILES[key]).is_file():
        return "absent"
    return "not listed" if listed_sha(listing, key) is None else "changed"


def read_kept(root: Path, key: str, listing: Mapping[str, Any]) -> dict[str, Any] | None:
    """The kept report ``key`` (parity, evaluation, bench, compatibility) as a JSON object, only when
    readout.json (``listing``: its parsed content) lists it with these bytes' sha256; else None."""
    data = _listed_bytes(root, key, listing)
    return _object(data) if data is not None else None


@dataclass
class Cell:
    """What one target showed on one execution provider: the decisions of its checks and the measured
    value of each metric (gated or not)."""

    decisions: set[str] = field(default_factory=set)
    measured: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class KeptParity:
    """The checks of a kept parity report that count for one release, by (target, provider)."""

    machine: str
    cells: dict[tuple[str, str], Cell]

    def verdicts(self) -> dict[str, str]:
        """Per target: FAIL (any check failed), PASS (every check on at least one provider passed; a
        provider not evaluated here is no failure and no pass), else NOT_EVALUATED."""
        by_target: dict[str, list[set[str]]] = {}
        for (target, _), cell in self.cells.items():
            by_target.setdefault(target, []).append(cell.decisions)
        out = {}
        for target, seen in by_target.items():
            out[target] = "FAIL" if any("FAIL" in d for d in seen) else (
                "PASS" if any(d == {"PASS"} for d in seen) else "NOT_EVALUATED")
        return out


def no_parity(shown: str | Path) -> str:
    """Why an artifact (``shown``: its path, or ARTIFACT for a build's staging) has no parity evidence."""
    return f"no {PARITY_FILE}: run `readout-export parity {shown}`"


def kept_parity(root: Path, release_id: str | None, files: Mapping[str, str],
                listing: Mapping[str, Any]) -> tuple[KeptParity | None, str]:
    """The artifact's kept parity report for ``release_id``, counting only targets whose graph sha256 in
    ``files`` (target -> sha256 now) is the one evaluated; or None and why there is none. ``listing``:
    readout.json's content, which must list the report (:func:`read_kept`)."""
    doc = read_kept(root, "parity", listing)
    if doc is None:
        status = kept_status(root, "parity", listing)
        shown = "ARTIFACT" if root.name.startswith(".") else root  # a build's staging directory: not its name
        if status == "absent":
            return None, no_parity(shown)
        return None, (f"{PARITY_FILE} is {WHY_IGNORED[status]}, so it is not evidence: run "
                      f"`readout-export parity {shown}` again")
    if release_id is None or doc.get("release_id") != release_id:
        return None, (f"{PARITY_FILE} is for release {str(doc.get('release_id'))[:12]}, not this one "
                      f"({str(release_id)[:12]})")
    evaluated = doc.get("target_files") if isinstance(doc.get("target_files"), dict) else {}
    cells: dict[tuple[str, str], Cell] = {}
    rows = [(c, True) for c in _list(doc.get("checks"))] + [(m, False) for m in _list(doc.get("measurements"))]
    for item, is_check in rows:
        if not isinstance(item, dict):
            continue
        target = str(item.get("target"))
        if target != RECONCILIATION and (target not in files or evaluated.get(target) != files[target]):
            continue  # not a target of this artifact, or not this graph of it
        cell = cells.setdefault((target, str(item.get("provider"))), Cell())
        if is_check:
            cell.decisions.add(str(item.get("decision")))
        if isinstance(item.get("measured"), (int, float)):
            cell.measured[str(item.get("metric"))] = float(item["measured"])
    return KeptParity(str(doc.get("machine", "")), cells), ""


def _list(value: Any) -> list[Any]:
    """A report's list field, or nothing: a listed report of another shape is read as holding no rows."""
    return value if isinstance(value, list) else []
