"""The split-role audit: every data file a lineage has used, with the role it was used in.

A lineage is every artifact over the same graphs: a build and the artifacts `calibrate` made from it share
the release id of the record their graphs embed (their *root*). Each use (file name, sha256, rows, a
digest per row, role, the command, the release it ran on, when) is kept twice:

- in the artifact, ``readout.json["lineage"]["data"]``, which travels with it (a calibrated artifact
  starts from its parent's);
- in a ledger per root on this machine (``$READOUT_EXPORT_LEDGER``, else
  ``$XDG_DATA_HOME/readout-export/lineage``), so that sibling artifacts (two calibrations of one build)
  see each other's uses, and a use is kept even when the artifact is not written (``--no-keep``).

The audit reads both, and with ``--parent`` the parent's too. One file keeps one role: data used in
another role is refused, by sha256 or when at least half of its rows (by content, ids and slices aside)
were in that data. A test file already evaluated on another release is flagged; on another release *of
the same lineage* (what changed can only be calibration or decisions, chosen by someone who had seen those
results) the run is also *tainted*: its gates are reported, but it cannot make the artifact EVALUATED.
"""
from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

from readout_sdk.errors import InputRefused

LEDGER_ENV = "READOUT_EXPORT_LEDGER"


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
    out = list((meta.get("lineage") or {}).get("data") or [])
    if root_dir is not None and (root_dir / "evaluation.json").is_file():
        try:
            kept = json.loads((root_dir / "evaluation.json").read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError):
            kept = {}
        for run in kept.get("runs", []):
            data = run.get("data") or {}
            if data.get("sha256"):
                out.append({**data, "use": "evaluate", "release_id": run.get("release_id"), "at": run.get("at"),
                            "root": root_of(meta.get("abi") or {})})
    out += ledger(root_of(meta.get("abi") or {}))
    seen, unique = set(), []
    for u in out:
        key = (u.get("sha256"), u.get("role"), u.get("use"), u.get("release_id"), u.get("at"))
        if key not in seen:
            seen.add(key)
            unique.append(u)
    return unique


def audit(history: Sequence[Mapping[str, Any]], data: Mapping[str, Any], role: str, release_id: str | None,
          root: str | None, path: str) -> tuple[list[str], bool]:
    """Refuse a role conflict (naming the file and the earlier use); return the report's flags and
    whether the run is tainted (see the module docstring)."""
    mine = set(data.get("row_digests") or ())
    flags, tainted = [], False
    for u in history:
        shared = len(mine & set(u.get("row_digests") or ()))
        same = u.get("sha256") == data["sha256"] or (mine and shared * 2 >= len(mine))
        earlier = (f"`{u.get('use')}` on release {str(u.get('release_id'))[:12]} at {u.get('at')} "
                   f"(file {u.get('file')}, sha256 {str(u.get('sha256'))[:12]})")
        if u.get("role") != role and same:
            what = "this data" if u.get("sha256") == data["sha256"] else f"{shared} of these {len(mine)} rows"
            raise RoleConflict(f"{path}: {what} (sha256 {data['sha256'][:12]}) was used as {u.get('role')} data by "
                               f"{earlier}; one file keeps one role per lineage, so it cannot be {role} data now")
        if u.get("role") != role and shared:
            flags.append(f"{shared} of these rows were {u.get('role')} data for {earlier}")
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
