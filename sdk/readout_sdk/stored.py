"""Whether stored outputs (an `encode` Parquet/Arrow file) are valid for an artifact.

`readout-export encode` (and `readout_sdk.ray.Predictor`) write the producing release's identity into the
Arrow schema metadata: ``readout.release_id``, ``readout.vectors_key`` (`Engine.cache_key("vectors")`:
the family's vector layer and everything it depends on, plus the precision) and ``readout.target``.
:func:`check_stored` compares a stored file's key with the one an artifact (or a loaded engine) gives
now: vectors stay valid across releases that changed only the head, calibration or decision.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

RELEASE_KEY = b"readout.release_id"
VECTORS_KEY = b"readout.vectors_key"
TARGET_KEY = b"readout.target"


@dataclass(frozen=True)
class StoredCheck:
    """The verdict on one stored file: ``valid`` and, either way, why."""

    valid: bool
    reason: str
    stored_key: str | None = None
    expected_key: str | None = None


def identity_metadata(engine: Any) -> dict[bytes, bytes]:
    """The schema metadata an output written with ``engine`` carries."""
    return {RELEASE_KEY: str(engine.release_id).encode(), VECTORS_KEY: engine.cache_key("vectors").encode(),
            TARGET_KEY: engine.target.name.encode()}


def read_metadata(path: str | Path) -> dict[bytes, bytes]:
    """Schema metadata of a Parquet file, an Arrow IPC file, or a directory of Parquet files (all must agree)."""
    import pyarrow.parquet as pq

    p = Path(path)
    if p.is_dir():
        files = sorted(p.glob("*.parquet"))
        if not files:
            raise FileNotFoundError(f"{p}: no .parquet files")
        metas = [dict(pq.read_schema(f).metadata or {}) for f in files]
        keys = {m.get(VECTORS_KEY) for m in metas}
        if len(keys) > 1:
            raise ValueError(f"{p}: its files were written by different releases ({len(keys)} vector keys)")
        return metas[0]
    if p.suffix in (".arrow", ".feather", ".ipc"):
        import pyarrow as pa

        with pa.memory_map(str(p)) as source:
            return dict(pa.ipc.open_file(source).schema.metadata or {})
    return dict(pq.read_schema(p).metadata or {})


def check_stored(path: str | Path, engine: Any) -> StoredCheck:
    """Whether the vectors stored at ``path`` are valid for ``engine`` (a loaded `readout_sdk.Engine`):
    the file's ``readout.vectors_key`` must equal ``engine.cache_key("vectors")``."""
    meta = read_metadata(path)
    stored = meta.get(VECTORS_KEY)
    expected = engine.cache_key("vectors")
    if stored is None:
        return StoredCheck(False, f"{path}: carries no {VECTORS_KEY.decode()} (not written by readout-export encode); "
                                  "its vectors cannot be matched to a release", None, expected)
    stored_s = stored.decode()
    release = meta.get(RELEASE_KEY, b"?").decode()[:12]
    if stored_s == expected:
        return StoredCheck(True, f"valid: written by release {release} with the same vector layers and precision "
                                 f"({engine.precision})", stored_s, expected)
    return StoredCheck(False, f"invalid: written by release {release} ({meta.get(TARGET_KEY, b'?').decode()}); its "
                              f"vector key differs from this artifact's at {engine.precision}: re-encode", stored_s, expected)
