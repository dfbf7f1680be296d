"""The release lifecycle, derived from evidence kept in the artifact, never typed by hand.

DRAFT (built) -> RECONCILED (reconciliation against the source and parity passed for at least one
target, in the kept ``parity.json`` of *this* release) -> EVALUATED (a frozen evaluation on a test split
met its gates: not in this release, so the state stops at RECONCILED) -> CANDIDATE (``readout-export
promote`` wrote ``compatibility.json`` for this release: diff against its parent, invalidation plan,
rollback target). ``readout.json["lifecycle"]`` keeps the last derived state for people and tools to
read; :func:`derive` is what decides, and `inspect` says when the two disagree.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

STATES = ("DRAFT", "RECONCILED", "EVALUATED", "CANDIDATE")
PARITY_FILE = "parity.json"
COMPATIBILITY_FILE = "compatibility.json"
RECONCILIATION = "reconciliation"  # the parity checks' target name for reconciliation


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


def _read(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def target_files(root: Path) -> dict[str, str]:
    """Each listed target's graph sha256, from the artifact's readout.json ({} when unreadable)."""
    meta = _read(root / "readout.json") or {}
    return {str(t.get("name") or _name(t)): str(t.get("sha256")) for t in meta.get("targets", []) if isinstance(t, dict)}


def _name(t: dict[str, Any]) -> str:
    from readout_sdk.artifact import target_name

    return target_name(str(t.get("format")), str(t.get("precision")), t.get("runtime"))


def parity_verdicts(root: Path, release_id: str | None,
                    files: dict[str, str] | None = None) -> tuple[dict[str, str], str]:
    """Per target of the kept parity report for ``release_id``: FAIL (any check failed), PASS (every check
    on at least one execution provider passed; a provider not evaluated here is no failure, and no pass
    either), else NOT_EVALUATED; and why there are none ('' when there are). Reconciliation is listed as
    a target. With ``files`` (target -> graph sha256 now), a target whose graph is not the one the report
    evaluated has no verdict (a replaced engine is not proven by its predecessor's parity)."""
    doc = _read(root / PARITY_FILE)
    if doc is None:
        return {}, f"no {PARITY_FILE}: run `readout-export parity {root}`"
    if release_id is None or doc.get("release_id") != release_id:
        return {}, f"{PARITY_FILE} is for release {str(doc.get('release_id'))[:12]}, not this one ({str(release_id)[:12]})"
    seen: dict[str, dict[str, set[str]]] = {}
    evaluated = doc.get("target_files") or {}
    for c in doc.get("checks", []):
        if not isinstance(c, dict):
            continue
        if files is not None and c.get("target") != RECONCILIATION and \
                evaluated.get(c.get("target")) != files.get(c.get("target")):
            continue
        seen.setdefault(str(c.get("target")), {}).setdefault(str(c.get("provider")), set()).add(str(c.get("decision")))
    out = {}
    for target, providers in seen.items():
        every = set().union(*providers.values())
        out[target] = "FAIL" if "FAIL" in every else (
            "PASS" if any(v == {"PASS"} for v in providers.values()) else "NOT_EVALUATED")
    return out, ""


def derive(root: str | Path, record: Mapping[str, Any]) -> Lifecycle:
    """The state the evidence in artifact directory ``root`` supports for ``record``'s release."""
    from readout_sdk.artifact import sha256_file

    root = Path(root)
    release_id = (record.get("identity") or {}).get("release_id")
    if release_id is None:
        return Lifecycle("DRAFT", [], ["a layered identity: rebuild with this readout-export"])
    verdicts, why = parity_verdicts(root, release_id, target_files(root))
    if why:
        return Lifecycle("DRAFT", [], [why])
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
    evidence = [{"file": PARITY_FILE, "sha256": sha256_file(root / PARITY_FILE),
                 "shows": f"reconciliation PASS; parity PASS for {', '.join(passed)}"}]
    compat = _read(root / COMPATIBILITY_FILE)
    if compat is not None and compat.get("release_id") == release_id:
        parent = (compat.get("rollback") or {}).get("release_id", "?")
        evidence.append({"file": COMPATIBILITY_FILE, "sha256": sha256_file(root / COMPATIBILITY_FILE),
                         "shows": f"promoted with rollback target {str(parent)[:12]}"})
        return Lifecycle("CANDIDATE", evidence, [])
    return Lifecycle("RECONCILED", evidence,
                     ["EVALUATED: a frozen evaluation on a test split (not in this release); "
                      "CANDIDATE: `readout-export promote ARTIFACT --parent PARENT`"])


def refresh(root: str | Path) -> Lifecycle:
    """Derive the state and keep it in readout.json (atomically); returns it."""
    from readout_sdk.atomic import write_atomic

    root = Path(root)
    meta = json.loads((root / "readout.json").read_text(encoding="utf-8"))
    state = derive(root, meta["abi"])
    meta["lifecycle"] = state.to_json()
    write_atomic(root / "readout.json", (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    return state
