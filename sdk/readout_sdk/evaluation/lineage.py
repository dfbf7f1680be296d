"""The split-role audit: every data file an artifact's lineage has used, by sha256, with its role.

``readout.json["lineage"]`` lists each use (file name, sha256, rows, role, what used it, the release and
when); a calibrated artifact starts from its parent's lineage. One file keeps one role for a lineage:
data used for calibration can never be a test split, and test data can never be fitted on. A test file
already evaluated on another release of the lineage is flagged: if that release's results shaped the
change, the split has become tuning data and a new untouched test split is needed.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

from readout_sdk.errors import InputRefused


class RoleConflict(InputRefused):
    """Data asked to serve in a role its lineage has already given it another one."""


def uses(meta: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The lineage's recorded uses (readout.json's ``lineage.data``)."""
    return list((meta.get("lineage") or {}).get("data") or [])


def audit(history: Sequence[Mapping[str, Any]], data: Mapping[str, Any], role: str, release_id: str | None,
          path: str) -> list[str]:
    """Refuse a role conflict (naming the file and the earlier use); return flags for the report."""
    for u in history:
        if u["sha256"] == data["sha256"] and u["role"] != role:
            raise RoleConflict(f"{path}: this data (sha256 {data['sha256'][:12]}) was used as {u['role']} data by "
                               f"`{u['use']}` on release {str(u.get('release_id'))[:12]} at {u.get('at')} "
                               f"(file {u.get('file')}); one file keeps one role per lineage, so it cannot be "
                               f"{role} data now")
    flags = []
    if role == "test":
        for u in history:
            if u["sha256"] == data["sha256"] and u["use"] == "evaluate" and u.get("release_id") != release_id:
                flags.append(f"this test data was already evaluated on release {str(u.get('release_id'))[:12]} at "
                             f"{u.get('at')}; if this release was tuned on those outcomes the split is tuning data "
                             "now, and a new untouched test split is needed")
    return flags


def record_use(history: Sequence[Mapping[str, Any]], data: Mapping[str, Any], role: str, use: str,
               release_id: str | None, produced: str | None = None) -> list[dict[str, Any]]:
    """The history with this use appended (``release_id``: the release the data ran through; ``produced``:
    the release a fit on it made)."""
    entry = {"file": data.get("file"), "sha256": data["sha256"], "rows": data["rows"], "role": role, "use": use,
             "release_id": release_id, "at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    if produced is not None:
        entry["produced"] = produced
    return [dict(u) for u in history] + [entry]
