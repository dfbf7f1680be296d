"""`readout-export promote`: make an EVALUATED artifact a CANDIDATE with a compatibility record (its parent must be at least RECONCILED).

``compatibility.json`` (written atomically into the artifact) holds the diff against the parent, the
cache-invalidation plan, and the rollback target: the parent's release id, layer digests and the sha256 of
every file that makes it up, so a rollback restores the whole known-good tuple, not just old weights.
"""
from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from readout_sdk.artifact import Artifact, open_artifact, sha256_file
from readout_sdk.release.compat import diff
from readout_sdk.release.identity import Identity, digest
from readout_sdk.release.lifecycle import COMPATIBILITY_FILE, derive, keep

from readout_export.errors import ReadoutExportError

SCHEMA = "readout-export/compatibility/1"
PLAN = {"contextual_cache": "contextual rows (per token, before the readout)",
        "vector_cache": "stored vectors (embeddings, token vectors, sparse term weights)",
        "raw_scores": "raw head outputs stored by position (logits, similarity scores)",
        "calibrated_scores": "calibrated scores stored by label name",
        "decisions": "decisions (labels, spans, thresholded sets, rankings)"}


class PromotionRefused(ReadoutExportError):
    """The artifact (or its parent) lacks the evidence a candidate needs: exit 2."""

    exit_code = 2


def _files(art: Artifact) -> dict[str, str]:
    # readout.json itself changes as reports are kept; the release id and the ABI record digest stand for it
    names = {art.tokenizer_file, *(t.file for t in art.targets)}
    return {n: sha256_file(art.path / n) for n in sorted(names)}


def promote(path: str | Path, parent_path: str | Path, trusted: Sequence[Any] = ()) -> dict[str, Any]:
    """Write ``compatibility.json`` for the artifact at ``path`` against ``parent_path``; return it.
    ``trusted``: the signature policy's keys (`readout_sdk.release.signing.trusted_keys`): where given,
    both artifacts must be signed by one of them, so evidence rewritten with its hashes is not promoted."""
    art, parent = open_artifact(path, trusted=trusted), open_artifact(parent_path, trusted=trusted)
    for who, a in (("artifact", art), ("parent", parent)):
        if a.identity is None:
            raise PromotionRefused(f"{a.path}: the {who} has no layered identity; rebuild it with this readout-export")
        state = derive(a)
        need = "EVALUATED" if who == "artifact" else "RECONCILED"  # the parent may predate evaluation
        if not state.at_least(need):
            raise PromotionRefused(f"{a.path}: the {who} is {state.state}, not {need}; missing: "
                                   f"{'; '.join(state.missing)}")
    ident, pid = Identity.of(art.record), Identity.of(parent.record)
    if ident.release_id == pid.release_id:
        raise PromotionRefused(f"{art.path} and its parent {parent.path} are the same release "
                               f"({ident.short()}); nothing to promote")
    d = diff(parent, art)
    doc = {
        "schema": SCHEMA,
        "release_id": ident.release_id,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "artifact": str(art.path.resolve()),
        "parent": {"path": str(parent.path.resolve()), "release_id": pid.release_id, "layers": pid.layers},
        "diff": d,
        "invalidation_plan": [{"cache": c, "what": PLAN[c], "action": "rebuild" if v else "reuse"}
                              for c, v in d["invalidates"].items()],
        "rollback": {"release_id": pid.release_id, "path": str(parent.path.resolve()),
                     "record_sha256": digest(parent.record), "files": _files(parent)},
    }
    state = keep(art.path, "compatibility", doc, {"parent": pid.release_id})
    if state.state != "CANDIDATE":  # cannot happen unless the evidence changed under us
        raise PromotionRefused(f"{art.path}: wrote {COMPATIBILITY_FILE} but the evidence supports {state.state}")
    return doc
