"""Ray Data bulk encoding: ``Dataset.map_batches(Predictor, ...)`` with the SDK's typed outputs as columns.

Each Ray actor loads the artifact once (verifying it as `readout_sdk.load` does) and appends the
family's record keys (`Family.record_keys`: vectors, labels, entities, ...) as new
columns with one fixed Arrow type per key (so every batch, even one with no entities at all, writes
the same schema); every input column (ids, metadata) is kept untouched. A name clash between an input
column and an output column is refused rather than overwritten; ``prefix`` renames the outputs.

Needs the ``ray`` extra: ``pip install 'readout-export[ray]'``.
"""
from __future__ import annotations

import json
import logging
from contextlib import contextmanager
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

from readout_sdk.errors import InputRefused, MissingExtra, SdkError
from readout_sdk.families import get
from readout_sdk.staging import place, staged
from readout_sdk.release.stored import identity_metadata
from readout_sdk.roles import Roles
from readout_sdk.serving.records import ROLE_FIELD, plain, predict_records, serving_fields

RAY_EXTRA = "pip install 'readout-export[ray]'"
INPUTS = (".jsonl", ".parquet")


class EncodeIncomplete(SdkError, RuntimeError):
    """A Ray Data run's output is not what the input asked for (rows lost, or files without the release
    identity); nothing is placed at the output path. A failure of the work, not a refusal: exit 1."""

    exit_code = 1


def _pyarrow() -> Any:
    try:
        import pyarrow
    except ImportError:
        raise MissingExtra(f"readout_sdk.serving.ray needs pyarrow and Ray Data: {RAY_EXTRA}") from None
    return pyarrow


def output_types(family: str, labels: tuple[str, ...] | None) -> dict[str, Any]:
    """The Arrow type of each record key of ``family`` (label-keyed dicts become structs in label order)."""
    return get(family).arrow_types(_pyarrow(), labels)


class Predictor:
    """A callable class for ``ray.data.Dataset.map_batches(..., batch_format="pyarrow")``.

    ``columns`` maps the family's input fields (``Family.fields``, e.g. ``text``, or
    ``query``/``document``) to column names; by default each field is read from the column of the same
    name. ``load_options`` go to :func:`readout_sdk.load` (``target``, ``backend``, ``streams``...).
    """

    def __init__(self, artifact: str | Path, columns: Mapping[str, str] | None = None, prefix: str = "",
                 batch_size: int = 32, role: str | None = None, **load_options: Any):
        from readout_sdk.engine import load

        if load_options.get("threads") is None:  # as many runtime threads as Ray gave this actor CPUs
            load_options["threads"] = _assigned_cpus()
        self.engine = load(artifact, **load_options)
        family = self.engine.family
        self.columns = resolve_columns(family, columns)
        applied = self.engine.role(role)  # an undeclared role is refused here, naming the declared ones
        self.role = applied.name if applied is not None else None
        self.outputs = {key: prefix + key for key in output_keys(self.engine.abi)}
        self.types = output_types(family, self.engine.labels) | {ROLE_FIELD: _pyarrow().string()}
        self.batch_size = batch_size
        # which release and vector layers produced these columns (readout_sdk.release.stored.check_stored reads it)
        self.metadata = identity_metadata(self.engine) if self.engine.identity is not None else {}

    def check(self, column_names: list[str]) -> None:
        """Refuse inputs whose columns clash with the outputs or lack a field's column."""
        check_columns(column_names, self.columns, self.outputs)

    def __call__(self, batch: Any) -> Any:
        pa = _pyarrow()
        table = batch if isinstance(batch, pa.Table) else pa.Table.from_pandas(batch, preserve_index=False)
        self.check(table.column_names)
        data = {field: table.column(col).to_pylist() for field, col in self.columns.items()}
        rows = [dict(zip(data, values)) | {ROLE_FIELD: self.role} for values in zip(*data.values())]
        try:
            records = predict_records(self.engine, rows, self.batch_size)
        except (InputRefused, TypeError) as e:  # name the row by its input columns, not its place in the batch
            raise InputRefused(f"{e} (in a batch of {len(rows)} rows starting at "
                               f"{_describe(table.slice(0, 1).to_pylist()[0], self.columns)})") from None
        for key, name in self.outputs.items():
            values = [plain(r[key]) for r in records]
            table = table.append_column(name, pa.array(values, type=self.types[key]))
        return table.replace_schema_metadata({**(table.schema.metadata or {}), **self.metadata})


def _check_stamped(staging: Path, stamped: bool) -> None:
    """Every written file must carry the one release identity its actors wrote into the batches' schema
    metadata (Ray Data keeps it): a file without it, or files of two releases, fail the run before the
    output is renamed into place."""
    from readout_sdk.release.stored import OUTPUTS_KEY, read_metadata

    if not stamped or not any(staging.glob("*.parquet")):
        return
    if OUTPUTS_KEY not in read_metadata(staging):  # read_metadata refuses files that disagree
        raise EncodeIncomplete(f"{staging}: written without the release identity in its schema metadata")


def _assigned_cpus() -> int | None:
    """Whole CPUs Ray assigned to this actor, or None outside a Ray worker."""
    try:
        import ray
    except ImportError:
        return None
    if not ray.is_initialized():
        return None
    cpus = ray.get_runtime_context().get_assigned_resources().get("CPU")
    return max(1, int(cpus)) if cpus else None


def check_columns(column_names: list[str], columns: Mapping[str, str], outputs: Mapping[str, str]) -> None:
    """Refuse an input whose columns clash with the outputs' names or lack a field's column."""
    clash = sorted(set(outputs.values()) & set(column_names))
    if clash:
        raise InputRefused(f"input column(s) {', '.join(clash)} would be overwritten by this model's outputs; "
                           "rename them or give an output prefix (--prefix / Predictor(prefix=...))")
    missing = [c for c in columns.values() if c not in column_names]
    if missing:
        raise InputRefused(f"no column {', '.join(map(repr, missing))} in the input (columns: "
                           f"{', '.join(column_names)}); name it with --column / Predictor(columns=...)")


def _describe(row: dict[str, Any], columns: Mapping[str, str]) -> str:
    others = [(k, v) for k, v in row.items() if k not in columns.values()][:2]
    return ", ".join(f"{k}={v!r}" for k, v in others) or "the batch's first row"


def output_keys(record: Mapping[str, Any]) -> tuple[str, ...]:
    """The output columns' keys: the family's record keys, and ``role`` where the artifact declares roles."""
    return get(record["family"]).record_keys + tuple(f for f in serving_fields(record) if f == ROLE_FIELD)


def resolve_columns(family: str, columns: Mapping[str, str] | None) -> dict[str, str]:
    """Input field -> column name for ``family``; unknown fields are refused by name."""
    need = get(family).fields
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


def count_rows(src: Path) -> int:
    """Rows in a JSON Lines file (non-blank lines) or a Parquet file (its metadata)."""
    if src.suffix == ".parquet":
        return int(_pyarrow().parquet.read_metadata(src).num_rows)
    with open(src, "rb") as f:
        return sum(1 for line in f if line.strip())


def _json_keys(src: Path, sample: int = 1000) -> dict[str, bool]:
    """The keys of a JSON Lines file's first rows, each with whether it was seen holding a string."""
    keys: dict[str, bool] = {}
    with open(src, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i >= sample:
                break
            if line.strip():
                for k, v in json.loads(line).items():
                    keys[k] = keys.get(k, False) or isinstance(v, str)
    return keys


def _json_strings(keys: dict[str, bool]) -> Any:
    """Arrow parse options typing every column seen holding JSON strings as string: Arrow would otherwise
    turn "2024-01-01" into a timestamp (and pandas "007" into 7), and input columns must come back as given."""
    import pyarrow.json as pj

    pa = _pyarrow()
    return pj.ParseOptions(explicit_schema=pa.schema([(k, pa.string()) for k, is_str in keys.items() if is_str]),
                           unexpected_field_behavior="infer")


def _check_request(src: Path, out: Path, address: str | None, num_cpus: int | None, actors: int,
                   cpus_per_actor: float | None, load_options: dict[str, Any]) -> float:
    """Refuse what cannot run before Ray starts; share the local cores out among the actors as runtime threads
    (in ``load_options``); return each actor's CPUs."""
    import os

    if not src.is_file():
        raise FileNotFoundError(f"{src}: no such input file")
    if src.suffix not in INPUTS:
        raise InputRefused(f"{src.name}: --input must be a .jsonl (JSON Lines) or .parquet file")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputRefused(f"{out}: output exists and is not an empty directory (Parquet files would mix with old ones)")
    if address and num_cpus is not None:
        raise InputRefused("--num-cpus sizes the local cluster; a cluster given by --address has its own CPUs")
    local_cpus = num_cpus or os.cpu_count() or 1
    cpus_per_actor = 1.0 if cpus_per_actor is None else cpus_per_actor
    if not address and load_options.get("threads") is None:
        # the local machine's cores are shared out among the actors as runtime threads, while each actor
        # reserves only its CPUs: reserving every CPU for the actors starves Ray Data's own tasks (a hang)
        load_options["threads"] = max(1, local_cpus // actors)
    if not address and actors * cpus_per_actor > local_cpus:
        raise InputRefused(f"{actors} actors x {cpus_per_actor:g} CPUs exceed the local cluster's {local_cpus} CPUs: "
                           "Ray would wait for them forever")
    return cpus_per_actor


@contextmanager
def _cluster(ray: Any, address: str | None, num_cpus: int | None) -> Iterator[None]:
    """Ray, started here (a local cluster, or the one at ``address``) unless it already is, and stopped again;
    Ray Data raising the SDK's own refusals, and quiet around our one summary line on our own local cluster."""
    started = not ray.is_initialized()
    if started:
        ray.init(address=address, num_cpus=num_cpus, include_dashboard=False, log_to_driver=False,
                 logging_level="ERROR")
    try:
        context = ray.data.DataContext.get_current()
        before = (context.enable_progress_bars, context.print_on_execution_start)
        context.raise_original_map_exception = True  # the SDK's refusal, not a wrapper
        data_log = logging.getLogger("ray.data")
        log_level = data_log.level
        if started:  # our own local cluster: its progress bars, plan printout and INFO lines are noise
            context.enable_progress_bars = context.print_on_execution_start = False
            data_log.setLevel(logging.ERROR)
        yield
    finally:
        if started:
            context.enable_progress_bars, context.print_on_execution_start = before
            data_log.setLevel(log_level)
            ray.shutdown()


def _read(ray: Any, src: Path, keys: dict[str, bool]) -> Any:
    """The input as a Ray dataset, its columns in the file's order."""
    # reading and writing are I/O: reserving CPUs for them could starve the actors (a deadlock on small machines)
    if src.suffix == ".parquet":
        return ray.data.read_parquet(str(src), num_cpus=0)
    ds = ray.data.read_json(str(src), num_cpus=0, parse_options=_json_strings(keys))
    names = ds.schema().names  # explicitly typed columns come first: restore the file's order
    order = [n for n in keys if n in names] + [n for n in names if n not in keys]
    return ds.select_columns(order) if order != names else ds


def _written(staging: Path, stamped: bool, expected: int, address: str | None) -> tuple[tuple[str, ...], int]:
    """The Parquet files written and their rows, every row of the input accounted for."""
    files = tuple(sorted(p.name for p in staging.glob("*.parquet")))
    written = sum(_pyarrow().parquet.read_metadata(staging / f).num_rows for f in files)
    _check_stamped(staging, stamped)
    if written != expected:
        raise EncodeIncomplete(f"{written} rows written for {expected} input rows" + (
            "; with --address, --output must be storage every node writes to" if address and not files else ""))
    return files, written


def encode_file(artifact: str | Path, source: str | Path, output: str | Path, columns: Mapping[str, str] | None = None,
                prefix: str = "", address: str | None = None, actors: int = 1, cpus_per_actor: float | None = None,
                batch_size: int = 256, model_batch_size: int = 32, num_cpus: int | None = None,
                role: str | None = None, **load_options: Any) -> EncodeResult:
    """Encode a JSON Lines or Parquet file with Ray Data and write Parquet files into ``output``.

    ``address``: a running Ray cluster (``auto``, ``HOST:PORT``, ``ray://HOST:10001``); without it a local
    cluster starts (``num_cpus`` CPUs, default all) and stops afterwards. ``role``: the input role every row
    is encoded under (e.g. ``document`` for a corpus; default: the artifact's declared default role). ``actors`` Ray actors each load
    the artifact once; ``batch_size`` rows go to an actor per call. With a cluster, the artifact, input and
    output paths must be the same on every node (shared storage). Rows come back in no particular order
    (keep an id column). Output appears only when complete: files are written to a staging directory
    beside ``output``, their row count is checked against the input's, then the directory is renamed.
    """
    try:
        import ray
    except ImportError:
        raise MissingExtra(f"encoding with Ray needs Ray Data: {RAY_EXTRA}") from None
    src, out = Path(source), Path(output)
    cpus_per_actor = _check_request(src, out, address, num_cpus, actors, cpus_per_actor, load_options)
    from readout_sdk.artifact import open_artifact
    from readout_sdk.release.signing import trusted_keys

    # the signature policy is checked here, before Ray starts, and again by each actor's load
    opened = open_artifact(artifact, check_graphs=False, graphs=False,
                           trusted=trusted_keys(load_options.get("trusted_keys")))
    family, stamped = opened.family, opened.identity is not None
    Roles.from_record(opened.record).resolve(role)  # an undeclared role is refused before Ray starts
    keys = _json_keys(src) if src.suffix == ".jsonl" else {}  # read once: the columns, and which are strings
    names_in = list(keys) if src.suffix == ".jsonl" else list(_pyarrow().parquet.read_schema(src).names)
    check_columns(names_in, resolve_columns(family, columns),
                  {key: prefix + key for key in output_keys(opened.record)})
    expected = count_rows(src)
    artifact = str(Path(artifact).resolve())
    with staged(out, "encoded") as staging:  # one run per output; what killed runs left is swept
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise InputRefused(f"{out} exists and is not empty; choose another --output")
        with _cluster(ray, address, num_cpus):
            t0 = time.perf_counter()
            ds = _read(ray, src, keys).map_batches(
                Predictor, batch_format="pyarrow", batch_size=batch_size, compute=ray.data.ActorPoolStrategy(size=actors),
                num_cpus=cpus_per_actor, fn_constructor_args=(artifact,),
                fn_constructor_kwargs={"columns": columns, "prefix": prefix, "role": role,
                                       "batch_size": model_batch_size, **load_options})
            try:
                ds.write_parquet(str(staging), ray_remote_args={"num_cpus": 0})
            except InputRefused as e:  # the actor's refusal (raise_original_map_exception), minus Ray's retry advice
                raise InputRefused(str(e.args[0] if e.args else e).split("\nFailed to apply UDF")[0]) from None
            seconds = time.perf_counter() - t0
            files, written = _written(staging, stamped, expected, address)
            place(staging, out)
    return EncodeResult(written, out, files, seconds)

