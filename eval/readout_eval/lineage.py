"""The split-role audit: every data file a lineage has used, with the role it was used in.

A lineage is every artifact over the same graphs: a build and the artifacts `calibrate` made from it share
the release id of the record their graphs embed (their *root*). Each use (file name, sha256, rows, a
content key per row, role, the command, the release it ran on, when) is kept twice:

- in the artifact, ``readout.json["lineage"]["data"]``, which travels with it (a calibrated artifact
  starts from its parent's);
- in a ledger per root on this machine (``$READOUT_EXPORT_LEDGER``, else
  ``$XDG_DATA_HOME/readout-export/lineage``), so that sibling artifacts (two calibrations of one build)
  see each other's uses, and a use is kept even when the artifact is not written (``--no-keep``).

The audit reads both, and with ``--parent`` the parent's too. One file keeps one role.

Two rows are *the same row* when their content keys are equal (`readout_eval.data.row_key`): the key
reads only the fields the family's evaluation reads (its input texts or pairs, the gold labels or values;
never ``id``, ``slice`` or any other field), with every string NFKC-normalized, case-folded, stripped of
zero-width and other invisible characters, and with each run of whitespace (no-break spaces included) made
one space; key order, integral floats (``1.0``/``1``) and the order of set-like gold lists (``labels``,
``entities``, ``relevant``) do not count. So a reordered, re-identified, re-cased or re-spaced copy of a
split, or one with fields added, is the same split.

Data is refused for a role when, for an earlier use in another role, it has the same sha256, or the two
share at least half of the rows of either one (counting distinct keys): half of this file was that data,
or half of that data is inside this file (so padding a split with new rows does not hide it). A smaller
overlap is accepted and flagged with its count.

Keys carry their format (``c1:`` and 16 hex digits). Records written before content keys hold bare 12-hex
digests of the raw rows: the audit compares those with this data's raw digests only (an exact copy of their
rows is still caught), never with its content keys; a key format this version does not know is compared
by sha256 alone, and flagged.

A test file already evaluated on another release is flagged; on another release *of the same lineage*
(what changed can only be calibration or decisions, chosen by someone who had seen those results) the
run is also *tainted*: its gates are reported, but it cannot make the artifact EVALUATED.
"""
from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

from readout_sdk.errors import InputRefused
from readout_eval.data import ROW_KEY

LEDGER_ENV = "READOUT_EXPORT_LEDGER"
RAW = "raw"  # the row digests of records from before content keys (`readout_eval.data.row_digest`)


class RoleConflict(InputRefused):
    """Data asked to serve in a role its lineage has already given it another one."""


def root_of(record: Mapping[str, Any]) -> str | None:
    """The lineage root: the release id of the record the artifact's graphs embed."""
    return (record.get("overlay_of") or {}).get("release_id") or (record.get("identity") or {}).get("release_id")


def ledger_path(root: str) -> Path:
    base = os.environ.get(LEDGER_ENV) or str(Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
                                             / "readout-export" / "lineage")
    return Path(base) / f"{root}.jsonl"


def ledger(root: str | None) -> list[dict[str, Any]]:
    """The uses this machine recorded for a lineage root."""
    if root is None or not ledger_path(root).is_file():
        return []
    out = []
    lines = ledger_path(root).read_bytes().decode("utf-8", errors="replace").split("\n")
    for n, line in enumerate(lines, 1):
        if line.strip():
            try:
                out.append(json.loads(line))
            except ValueError:
                if n == len(lines):  # no newline after it: an append that was killed mid-write, never a use
                    break
                raise InputRefused(f"{ledger_path(root)}:{n}: not JSON; the lineage ledger is damaged") from None
    return out


def append(root: str | None, entry: Mapping[str, Any]) -> None:
    """Add one use to the ledger of ``root`` (one line, flushed to disk)."""
    if root is None:
        return
    path = ledger_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+b") as f:
        try:
            import fcntl

            fcntl.flock(f.fileno(), fcntl.LOCK_EX)  # appends from several runs: one at a time
        except ImportError:
            pass
        _cut_torn_tail(f.fileno())
        f.write((json.dumps(dict(entry), sort_keys=True) + "\n").encode("utf-8"))
        f.flush()
        os.fsync(f.fileno())


def _cut_torn_tail(fd: int) -> None:
    """Drop what an append killed mid-write left after the last newline (never a recorded use)."""
    end = os.lseek(fd, 0, os.SEEK_END)
    if end == 0 or os.pread(fd, 1, end - 1) == b"\n":
        return
    start = max(0, end - (1 << 20))
    cut = os.pread(fd, end - start, start).rfind(b"\n")
    os.ftruncate(fd, start + cut + 1 if cut >= 0 else start)


def uses(meta: Mapping[str, Any], root_dir: Path | None = None) -> list[dict[str, Any]]:
    """An artifact's recorded uses: its lineage, its kept evaluation runs, and its root's ledger."""
    lineage = meta.get("lineage") if isinstance(meta.get("lineage"), Mapping) else {}
    out = [u for u in (lineage.get("data") or []) if isinstance(u, Mapping)] if isinstance(lineage.get("data"), list) else []
    if root_dir is not None and (root_dir / "evaluation.json").is_file():
        # read even when readout.json does not list it: for the audit a use is a use, whoever vouches for it
        try:
            kept = json.loads((root_dir / "evaluation.json").read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            kept = {}
        runs = kept.get("runs") if isinstance(kept, dict) and isinstance(kept.get("runs"), list) else []
        for run in runs:
            data = run.get("data") if isinstance(run, dict) and isinstance(run.get("data"), dict) else {}
            if data.get("sha256"):
                out.append({**data, "use": "evaluate", "release_id": run.get("release_id"), "at": run.get("at"),
                            "root": root_of(meta.get("abi") or {})})
    out += ledger(root_of(meta.get("abi") or {}))
    seen, unique = set(), []
    for u in out:
        key = json.dumps([u.get(k) for k in ("sha256", "role", "use", "release_id", "at")], default=str)  # hashable
        if key not in seen:
            seen.add(key)
            unique.append(u)
    return unique


def audit(history: Sequence[Mapping[str, Any]], data: Mapping[str, Any], role: str, release_id: str | None,
          root: str | None, path: str) -> tuple[list[str], bool]:
    """Refuse a role conflict (naming the file and the earlier use); return the report's flags and
    whether the run is tainted (see the module docstring)."""
    flags, tainted = [], False
    ours = {ROW_KEY: set(data.get("row_digests") or ()), RAW: set(data.get("raw_row_digests") or ())}
    for u in history:
        kind, theirs = recorded(u)
        mine = ours.get(kind, set())  # digests of two formats are never compared
        shared = len(mine & theirs)
        same_file = u.get("sha256") == data["sha256"]
        same = same_file or (shared > 0 and 2 * shared >= min(len(mine), len(theirs)))
        earlier = (f"`{u.get('use')}` on release {str(u.get('release_id'))[:12]} at {u.get('at')} "
                   f"(file {u.get('file')}, sha256 {str(u.get('sha256'))[:12]})")
        if u.get("role") != role and same:
            what = "this data" if same_file else \
                f"{shared} of these {len(mine)} rows (equal by content; that data had {len(theirs)})"
            raise RoleConflict(f"{path}: {what} (sha256 {data['sha256'][:12]}) was used as {u.get('role')} data by "
                               f"{earlier}; one file keeps one role per lineage, so it cannot be {role} data now")
        if u.get("role") != role and shared:
            flags.append(f"{shared} of these rows were {u.get('role')} data for {earlier}")
        if u.get("role") != role and theirs and kind not in ours:
            flags.append(f"{earlier} recorded row keys of a format this version does not read; "
                         f"compared by sha256 only")
        if role == "test" and same and u.get("use") == "evaluate" and u.get("role") == "test" \
                and u.get("release_id") != release_id:
            one_lineage = root is not None and u.get("root") == root
            tainted |= one_lineage
            flags.append(f"this test data was already evaluated by {earlier}; "
                         + ("that release shares these graphs, so what changed since (calibration or decisions) "
                            "was chosen after those results: this run cannot make the artifact EVALUATED, and a "
                            "new untouched test split is needed" if one_lineage else
                            "if this release was tuned on those outcomes the split is tuning data now, and a new "
                            "untouched test split is needed"))
    return flags, tainted


def recorded(use: Mapping[str, Any]) -> tuple[str | None, set[str]]:
    """The format of an earlier use's row digests (``c1`` content keys; ``raw`` for the bare hex a record
    from before them holds; None for none or a mix) and the distinct digests themselves."""
    digests = use.get("row_digests")
    theirs = {d for d in digests if isinstance(d, str)} if isinstance(digests, list) else set()
    kinds = {d.split(":", 1)[0] if ":" in d else RAW for d in theirs}
    return (kinds.pop() if len(kinds) == 1 else None), theirs


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def entry(data: Mapping[str, Any], role: str, use: str, release_id: str | None, root: str | None,
          produced: str | None = None, at: str | None = None) -> dict[str, Any]:
    """One use (``release_id``: the release the data ran through; ``produced``: the release a fit on it made)."""
    out = {"file": data.get("file"), "sha256": data["sha256"], "rows": data["rows"],
           "row_digests": list(data.get("row_digests") or ()), "role": role, "use": use, "release_id": release_id,
           "root": root, "at": at or now()}
    if produced is not None:
        out["produced"] = produced
    return out
