"""Ray Data bulk encoding: ``Dataset.map_batches(Predictor, ...)`` with the SDK's typed outputs as columns.

Each Ray actor loads the artifact once (verifying it as `readout_sdk.load` does) and appends the
family's record keys (`readout_sdk.records.OUTPUT_KEYS`: vectors, labels, entities, ...) as new
columns; every input column (ids, metadata) is kept untouched. A name clash between an input column
and an output column is refused rather than overwritten; ``prefix`` renames the outputs.

Needs the ``ray`` extra: ``pip install 'readout-export[ray]'``.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from readout_sdk.errors import InputRefused
from readout_sdk.records import FIELDS, OUTPUT_KEYS, predict_records

RAY_EXTRA = "pip install 'readout-export[ray]'"


def _pyarrow() -> Any:
    try:
        import pyarrow
    except ImportError:
        raise ImportError(f"readout_sdk.ray needs pyarrow and Ray Data: {RAY_EXTRA}") from None
    return pyarrow


class Predictor:
    """A callable class for ``ray.data.Dataset.map_batches(..., batch_format="pyarrow")``.

    ``columns`` maps the family's input fields (``readout_sdk.records.FIELDS``, e.g. ``text``, or
    ``query``/``document``) to column names; by default each field is read from the column of the same
    name. ``load_options`` go to :func:`readout_sdk.load` (``target``, ``backend``, ``streams``...).
    """

    def __init__(self, artifact: str | Path, columns: Mapping[str, str] | None = None, prefix: str = "",
                 batch_size: int = 32, **load_options: Any):
        from readout_sdk.engine import load

        self.engine = load(artifact, **load_options)
        family = self.engine.family
        self.columns = resolve_columns(family, columns)
        self.outputs = {key: prefix + key for key in OUTPUT_KEYS[family]}
        self.batch_size = batch_size

    def __call__(self, batch: Any) -> Any:
        pa = _pyarrow()
        table = batch if isinstance(batch, pa.Table) else pa.Table.from_pandas(batch, preserve_index=False)
        clash = sorted(set(self.outputs.values()) & set(table.column_names))
        if clash:
            raise InputRefused(f"input column(s) {', '.join(clash)} would be overwritten by this model's outputs; "
                               "rename them or give an output prefix (--prefix / Predictor(prefix=...))")
        missing = [c for c in self.columns.values() if c not in table.column_names]
        if missing:
            raise InputRefused(f"no column {', '.join(map(repr, missing))} in the input (columns: "
                               f"{', '.join(table.column_names)}); name it with --column / Predictor(columns=...)")
        data = {field: table.column(col).to_pylist() for field, col in self.columns.items()}
        rows = [dict(zip(data, values)) for values in zip(*data.values())]
        records = predict_records(self.engine, rows, self.batch_size)
        for key, name in self.outputs.items():
            table = table.append_column(name, _column(pa, [r[key] for r in records]))
        return table


def _column(pa: Any, values: list[Any]) -> Any:
    """An Arrow column; vectors stay float32 (Arrow would widen Python floats to float64)."""
    import numpy as np

    if values and isinstance(values[0], np.ndarray) and values[0].dtype == np.float32:
        return pa.array([v.tolist() for v in values], type=pa.list_(pa.float32()))
    if values and isinstance(values[0], list) and values[0] and isinstance(values[0][0], np.ndarray):
        return pa.array([[row.tolist() for row in v] for v in values], type=pa.list_(pa.list_(pa.float32())))
    return pa.array([v.tolist() if isinstance(v, np.ndarray) else v for v in values])


def resolve_columns(family: str, columns: Mapping[str, str] | None) -> dict[str, str]:
    """Input field -> column name for ``family``; unknown fields are refused by name."""
    need = FIELDS[family]
    given = dict(columns or {})
    unknown = sorted(set(given) - set(need))
    if unknown:
        raise InputRefused(f"{family} rows carry {', '.join(need)}; no field {', '.join(unknown)}")
    return {field: given.get(field, field) for field in need}


@dataclass(frozen=True)
class EncodeResult:
    """What :func:`encode_file` wrote."""

    rows: int
    output: Path
    files: tuple[str, ...]
    seconds: float


def encode_file(artifact: str | Path, source: str | Path, output: str | Path, columns: Mapping[str, str] | None = None,
                prefix: str = "", address: str | None = None, actors: int = 1, cpus_per_actor: float = 1.0,
                batch_size: int = 256, model_batch_size: int = 32, num_cpus: int | None = None,
                **load_options: Any) -> EncodeResult:
    """Encode a JSON Lines or Parquet file with Ray Data and write Parquet files into ``output``.

    ``address``: a running Ray cluster (``ray://...`` or ``auto``); without it a local cluster starts
    (``num_cpus`` CPUs, default all) and stops afterwards. ``actors`` Ray actors each load the artifact
    once; ``batch_size`` rows go to an actor per call.
    """
    import time

    try:
        import ray
    except ImportError:
        raise ImportError(f"encoding with Ray needs Ray Data: {RAY_EXTRA}") from None
    src, out = Path(source), Path(output)
    if not src.is_file():
        raise FileNotFoundError(f"{src}: no such input file")
    if src.suffix not in (".jsonl", ".json", ".parquet"):
        raise InputRefused(f"{src.name}: --input must be a .jsonl or .parquet file")
    if out.exists() and any(out.iterdir()):
        raise InputRefused(f"{out}: output directory is not empty (Parquet files would mix with old ones)")
    artifact = str(Path(artifact).resolve())
    started = not ray.is_initialized()
    if started:
        os.environ.setdefault("RAY_ACCEPT_CLUSTER_RESOURCES", "1")
        ray.init(address=address, num_cpus=None if address else num_cpus, include_dashboard=False,
                 log_to_driver=False, logging_level="ERROR")
    try:
        t0 = time.perf_counter()
        # reading and writing are I/O: reserving CPUs for them could starve the actors (a deadlock on small machines)
        ds = (ray.data.read_parquet(str(src), num_cpus=0) if src.suffix == ".parquet"
              else ray.data.read_json(str(src), lines=True, num_cpus=0))
        ds = ds.map_batches(Predictor, batch_format="pyarrow", batch_size=batch_size, concurrency=actors,
                            num_cpus=cpus_per_actor, fn_constructor_args=(artifact,),
                            fn_constructor_kwargs={"columns": columns, "prefix": prefix,
                                                   "batch_size": model_batch_size, **load_options})
        ds.write_parquet(str(out), ray_remote_args={"num_cpus": 0})
        seconds = time.perf_counter() - t0
    finally:
        if started:
            ray.shutdown()
    files = tuple(sorted(p.name for p in out.glob("*.parquet")))
    rows = int(_pyarrow().parquet.ParquetDataset(str(out)).read().num_rows) if files else 0
    return EncodeResult(rows, out, files, seconds)
