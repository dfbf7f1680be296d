"""Whether stored outputs (an `encode` Parquet/Arrow file) are valid for an artifact.

`readout-export encode` (and `readout_sdk.serving.ray.Predictor`) write the producing release's identity into the
Arrow schema metadata: ``readout.release_id``, ``readout.target``, ``readout.outputs`` (what the columns
are, as a cache kind: ``vectors`` for embedding, late-interaction and sparse records, ``decisions`` for
every other family, whose records hold labels and calibrated scores) and ``readout.outputs_key``
(`Engine.cache_key` of that kind). Vector families also get ``readout.vectors_key``. :func:`check_stored`
compares a stored file's key with the one an engine gives now: stored vectors stay valid across releases
that changed only the head, calibration or decision; stored decisions only while every layer up to the
decision is the same (a head permuted with its label map keeps them: they are keyed by label name).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from readout_sdk.errors import InputRefused

RELEASE_KEY = b"readout.release_id"
TARGET_KEY = b"readout.target"
OUTPUTS = b"readout.outputs"
OUTPUTS_KEY = b"readout.outputs_key"
VECTORS_KEY = b"readout.vectors_key"


@dataclass(frozen=True)
class StoredCheck:
    """The verdict on one stored file: ``valid`` and, either way, why."""

    valid: bool
    reason: str
    stored_key: str | None = None
    expected_key: str | None = None


def identity_metadata(engine: Any) -> dict[bytes, bytes]:
    """The schema metadata an output written with ``engine`` carries."""
    kind = engine.family_spec.stored_cache
    meta = {RELEASE_KEY: str(engine.release_id).encode(), TARGET_KEY: engine.target.name.encode(),
            OUTPUTS: kind.encode(), OUTPUTS_KEY: engine.cache_key(kind).encode()}
    if kind == "vectors":
        meta[VECTORS_KEY] = meta[OUTPUTS_KEY]
    return meta


def read_metadata(path: str | Path) -> dict[bytes, bytes]:
    """Schema metadata of a Parquet file, an Arrow IPC file, or a directory of Parquet files (all must agree)."""
    import pyarrow.parquet as pq

    p = Path(path)
    if p.is_dir():
        files = sorted(p.glob("*.parquet"))
        if not files:
            raise FileNotFoundError(f"{p}: no .parquet files")
        metas = [dict(pq.read_schema(f).metadata or {}) for f in files]
        keys = {m.get(OUTPUTS_KEY) for m in metas}
        if len(keys) > 1:
            raise InputRefused(f"{p}: its files were written by different releases ({len(keys)} output keys)")
        return metas[0]
    if p.suffix in (".arrow", ".feather", ".ipc"):
        import pyarrow as pa

        with pa.memory_map(str(p)) as source:
            return dict(pa.ipc.open_file(source).schema.metadata or {})
    return dict(pq.read_schema(p).metadata or {})


def check_stored(path: str | Path, engine: Any) -> StoredCheck:
    """Whether the outputs stored at ``path`` are valid for ``engine`` (a loaded `readout_sdk.Engine`): the
    file's ``readout.outputs_key`` must equal ``engine.cache_key`` of the kind it stores."""
    meta = read_metadata(path)
    stored, kind = meta.get(OUTPUTS_KEY), meta.get(OUTPUTS, b"").decode()
    if stored is None or not kind:
        return StoredCheck(False, f"{path}: carries no {OUTPUTS_KEY.decode()} (not written by readout-export "
                                  "encode); its outputs cannot be matched to a release")
    try:
        expected = engine.cache_key(kind)
    except ValueError:
        return StoredCheck(False, f"{path}: stores {kind!r}, which this SDK does not key", stored.decode())
    release = meta.get(RELEASE_KEY, b"?").decode()[:12]
    target = meta.get(TARGET_KEY, b"?").decode()
    if stored.decode() == expected:
        return StoredCheck(True, f"valid: {kind} written by release {release} ({target}) depend only on layers "
                                 f"this artifact shares, computed by the same target", stored.decode(), expected)
    return StoredCheck(False, f"invalid: {kind} written by release {release} ({target}) depend on layers or a "
                              f"target this artifact ({engine.target.name}) does not share: re-encode",
                       stored.decode(), expected)
