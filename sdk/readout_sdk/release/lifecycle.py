"""The release lifecycle, derived from evidence kept in the artifact, never typed by hand.

DRAFT (built) -> RECONCILED (reconciliation against the source and parity passed for at least one
target, in the kept ``parity.json`` of *this* release) -> EVALUATED (the latest test-role evaluation of
this release, kept in ``evaluation.json``, had gates and all of them passed) -> CANDIDATE (``readout-export
promote`` wrote ``compatibility.json`` for this release: diff against its parent, invalidation plan,
rollback target). ``readout.json["lifecycle"]`` keeps the last derived state for people and tools to
read; :func:`derive` is what decides, and `inspect` says when the two disagree.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional

from readout_sdk.release.evidence import (KEPT_FILES, PARITY_FILE, RECONCILIATION, WHY_IGNORED, kept_parity,
                                         kept_status, listed_sha, no_parity, pending_path, read_kept)

STATES = ("DRAFT", "RECONCILED", "EVALUATED", "CANDIDATE")
COMPATIBILITY_FILE = "compatibility.json"
EVALUATION_FILE = "evaluation.json"
NO_IDENTITY = "a layered identity: rebuild with this readout-export"


@dataclass
class Lifecycle:
    """A derived state, the evidence it rests on, and what the next state still needs."""

    state: str
    rests_on: list[dict[str, Any]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def at_least(self, state: str) -> bool:
        return STATES.index(self.state) >= STATES.index(state)


def derive(art: Any) -> Lifecycle:
    """The state the evidence kept in artifact ``art`` (a `readout_sdk.artifact.Artifact`) supports."""
    return derive_from(art.path, art.record, art.target_files, art.extra)


def fresh(record: Mapping[str, Any]) -> Lifecycle:
    """A fresh build's state: DRAFT, for it holds no evidence yet (what :func:`derive_from` finds in its
    staging directory, stated without looking)."""
    if (record.get("identity") or {}).get("release_id") is None:
        return Lifecycle("DRAFT", [], [NO_IDENTITY])
    return Lifecycle("DRAFT", [], [no_parity("ARTIFACT")])


def derive_from(root: str | Path, record: Mapping[str, Any], files: Mapping[str, str],
                listing: Mapping[str, Any] | None = None) -> Lifecycle:
    """The state the evidence in directory ``root`` supports for ``record``'s release, whose targets'
    graphs have the sha256s ``files`` (target -> sha256). ``listing``: readout.json's content, which
    lists each kept report with its sha256 (`readout_sdk.release.evidence.read_kept`); none: no evidence."""
    root = Path(root)
    listing = listing or {}
    release_id = (record.get("identity") or {}).get("release_id")
    if release_id is None:
        return Lifecycle("DRAFT", [], [NO_IDENTITY])
    kept, why = kept_parity(root, release_id, files, listing)
    if kept is None:
        return Lifecycle("DRAFT", [], [why])
    verdicts = kept.verdicts()
    recon = verdicts.pop(RECONCILIATION, None)
    passed = sorted(t for t, v in verdicts.items() if v == "PASS")
    missing = []
    if recon != "PASS":
        missing.append(f"reconciliation with the source model: {recon or 'not run'} in {PARITY_FILE}")
    if not passed:
        missing.append(f"parity passing for at least one target (kept: "
                       f"{', '.join(f'{t} {v}' for t, v in sorted(verdicts.items())) or 'none'})")
    if missing:
        return Lifecycle("DRAFT", [], missing)
    evidence = [{"file": PARITY_FILE, "sha256": listed_sha(listing, "parity"),
                 "shows": f"reconciliation PASS; parity PASS for {', '.join(passed)}"}]
    evaluated = passed_test_evaluation(root, release_id, listing)
    if evaluated is None:
        return Lifecycle("RECONCILED", evidence,
                         [f"EVALUATED: a test evaluation of this release whose gates all pass "
                          f"(`readout-export evaluate ARTIFACT --data TEST.jsonl --role test`, kept in {EVALUATION_FILE})"])
    evidence.append({"file": EVALUATION_FILE, "sha256": listed_sha(listing, "evaluation"),
                     "shows": f"test evaluation on data {evaluated['data']['sha256'][:12]} ({evaluated['data']['rows']} "
                              f"rows): {len(evaluated['gates'])} gates PASS"})
    compat = read_kept(root, "compatibility", listing)
    if compat is not None and compat.get("release_id") == release_id:
        parent = (compat.get("rollback") or {}).get("release_id", "?")
        evidence.append({"file": COMPATIBILITY_FILE, "sha256": listed_sha(listing, "compatibility"),
                         "shows": f"promoted with rollback target {str(parent)[:12]}"})
        return Lifecycle("CANDIDATE", evidence, [])
    return Lifecycle("EVALUATED", evidence, ["CANDIDATE: `readout-export promote ARTIFACT --parent PARENT`"])


def passed_test_evaluation(root: Path, release_id: str, listing: Mapping[str, Any]) -> dict[str, Any] | None:
    """The latest test-role evaluation of this release kept in evaluation.json, if its gates all passed."""
    kept = read_kept(root, "evaluation", listing)
    if kept is None or kept.get("release_id") != release_id:
        return None
    runs = kept.get("runs") if isinstance(kept.get("runs"), list) else []
    tests = [r for r in runs if isinstance(r, dict) and r.get("role") == "test" and r.get("release_id") == release_id]
    if not tests:
        return None
    last = tests[-1]  # a later failing test run takes the state back
    ok = last.get("verdict") == "PASS" and not last.get("tainted") and last.get("gates") \
        and all(g.get("decision") == "PASS" for g in last["gates"])
    return last if ok else None


def refresh(root: str | Path, updates: Mapping[str, Any] | None = None) -> Lifecycle:
    """Apply ``updates`` to readout.json, derive the state its evidence supports and keep it there, in one
    atomic write; returns the state."""
    from readout_sdk.staging import exclusive

    root = Path(root)
    with exclusive(root / "readout.json", wait=UPDATE_WAIT, what="updated"):
        return _refresh(root, updates)


UPDATE_WAIT = 120.0  # seconds a kept-report update waits for another one on the same artifact


def _refresh(root: Path, updates: Mapping[str, Any] | None) -> Lifecycle:
    from readout_sdk.artifact import Target
    from readout_sdk.atomic import write_atomic

    meta = json.loads((root / "readout.json").read_text(encoding="utf-8"))
    meta.update(updates or {})
    files = {t.name: t.sha256 for t in (Target(**t) for t in meta.get("targets", []))}
    state = derive_from(root, meta["abi"], files, meta)
    meta["lifecycle"] = state.to_json()
    write_atomic(root / "readout.json", (json.dumps(_strict(meta), indent=2, sort_keys=True) + "\n").encode("utf-8"))
    return state


Make = Callable[[Optional[dict[str, Any]]], tuple[Mapping[str, Any], Optional[Mapping[str, Any]]]]


def keep(root: str | Path, key: str, doc: Mapping[str, Any] | Make, summary: Mapping[str, Any] | None = None,
         updates: Mapping[str, Any] | None = None) -> Lifecycle:
    """Keep report ``doc`` as the artifact's ``key`` report (parity, evaluation, bench, compatibility) and
    list it in readout.json with its sha256 beside ``summary`` (and any other ``updates``) and the state the
    evidence now supports. ``doc`` may be a function of the report kept now (the listed one, or None) that
    returns ``(doc, summary)``: it is called under the artifact's lock, so a concurrent run's report is
    extended, never lost.

    The report and its listing change together or not at all, for readers and after a kill:

    1. the new report is written beside the old one as a hidden pending file;
    2. readout.json is switched, in one atomic write, to list the new sha256 (the commit point; from here
       readers find the listed bytes in the pending file, `readout_sdk.release.evidence.read_kept`);
    3. the pending file is renamed over the report.

    Killed before 2, the old report stays listed and the pending file is removed by the next keep; killed
    after 2, the next keep finishes the rename. A report file that readout.json does not list (edited by
    hand, or left by an older version) is never extended nor silently replaced: it is moved aside, named in
    a warning, and a new report started."""
    import hashlib

    from readout_sdk.atomic import write_atomic
    from readout_sdk.staging import exclusive

    root = Path(root)
    name = KEPT_FILES[key]
    with exclusive(root / "readout.json", wait=UPDATE_WAIT, what="updated"):  # the report and its listing together
        listing = settle(root)
        if callable(doc):
            doc, summary = doc(read_kept(root, key, listing))
        _set_aside(root, key, listing)
        data = (json.dumps(_strict(doc), indent=2, allow_nan=False, default=str) + "\n").encode("utf-8")
        entry = {**(summary or {}), "file": name, "sha256": hashlib.sha256(data).hexdigest()}
        pending = pending_path(root, key)
        write_atomic(pending, data)
        state = _refresh(root, {**(updates or {}), key: entry})
        os.replace(pending, root / name)
        return state


def settle(root: Path) -> dict[str, Any]:
    """Finish or undo what a killed keep left (call under the artifact's lock); return readout.json's
    content. A pending report readout.json lists is renamed into place; any other pending file is removed."""
    meta = json.loads((root / "readout.json").read_text(encoding="utf-8"))
    for key, name in KEPT_FILES.items():
        pending = pending_path(root, key)
        if not pending.is_file():
            continue
        if _sha256_of(pending) == listed_sha(meta, key):
            os.replace(pending, root / name)  # listed already: the rename was all that was left
        else:
            pending.unlink()  # never listed: the run that wrote it died before its commit point
    return meta


def _set_aside(root: Path, key: str, listing: Mapping[str, Any]) -> None:
    """Move a report file that readout.json does not list (or lists with another sha256) out of the way,
    keeping its bytes: a user's file is never deleted, and an unlisted one is never vouched for."""
    status = kept_status(root, key, listing)
    if status not in ("not listed", "changed"):
        return
    from datetime import datetime, timezone

    path = root / KEPT_FILES[key]
    aside = path.with_name(f"{path.name}.ignored-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%S%fZ')}")
    os.replace(path, aside)
    # one line on stderr, as the commands print theirs (a logger can be silenced by a server's logging config)
    print(f"warning: {path} was {WHY_IGNORED[status]}; moved aside to {aside.name} (kept, not evidence) and a "
          "new report started", file=sys.stderr)


def _sha256_of(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _strict(value: Any) -> Any:
    """Strict JSON: a non-finite measurement is kept as the string "nan", "inf" or "-inf", never as NaN."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, Mapping):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    return value
