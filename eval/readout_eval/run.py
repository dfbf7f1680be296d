"""`evaluate`: one artifact (and optionally its parent) on one evaluation file in one declared role."""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable, Sequence

from readout_sdk.errors import InputRefused
from readout_eval import data as D
from readout_eval import gates as G
from readout_eval import lineage as L
from readout_eval.paired import compare
from readout_eval.slices import DEFAULT_MIN_SUPPORT, slices
from readout_eval.tasks import Case, Measured, Task, task_of
from readout_eval.tasks.fields import content_fields
from readout_eval.tasks.base import items_of


SCHEMA = "readout-evaluation/1"


def settings(meta: dict[str, Any]) -> dict[str, Any]:
    """The build manifest's ``evaluation`` section, as the artifact keeps it."""
    return dict(((meta.get("build") or {}).get("manifest") or {}).get("evaluation") or {})


def gold_values(engine: Any, ds: D.Dataset) -> list[Any]:
    """Every row's gold value, checked before anything runs (a refusal names the file, line and field)."""
    task = task_of(engine.family_spec)
    golds = []
    for row in ds.rows:
        if not any(f in row.fields for f in task.gold_fields):
            raise ds.fail(row, f"no gold field: a {engine.family} row needs "
                               f"{' or '.join(repr(f) for f in task.gold_fields)}")
        try:
            golds.append(task.gold(ds, row, engine))
        except D.DataError:
            raise
        except (TypeError, ValueError, KeyError, AttributeError, OverflowError) as e:  # a malformed gold value
            raise ds.fail(row, f"malformed {' / '.join(task.gold_fields)}: {type(e).__name__}: {e}") from None
    if task.reads_items:
        items_of(engine, ds)  # the inputs too, before anything runs
    return golds


def measure(engine: Any, ds: D.Dataset, golds: list[Any] | None = None) -> tuple[Task, list[Case], Measured]:
    """The family's task, its cases and its metrics for ``engine`` on ``ds``."""
    task = task_of(engine.family_spec)
    cases = task.cases(engine, ds, gold_values(engine, ds) if golds is None else golds)
    return task, cases, task.measure(cases, engine)


def evaluate(artifact: str | Path, data: str | Path, role: str, parent: str | Path | None = None,
             target: str | None = None, gates: Sequence[str] = (), min_support: int | None = None,
             keep: bool = True, say: Callable[[str], None] = lambda m: None) -> dict[str, Any]:
    """Evaluate ``artifact`` on ``data`` in ``role``; return the report (see docs/evaluation.md). With
    ``keep`` the artifact keeps it (evaluation.json, its lineage, its lifecycle state)."""
    import readout_sdk

    if role not in D.ROLES:
        raise InputRefused(f"--role must be one of {', '.join(D.ROLES)}, got {role!r}")
    ds = D.read(data)
    root = Path(artifact)
    engine = readout_sdk.load(root, target=target)
    try:
        return _evaluate(engine, ds, root, role, parent, target, gates, min_support, keep, say)
    finally:
        engine.close()


def _evaluate(engine: Any, ds: D.Dataset, root: Path, role: str, parent: str | Path | None, target: str | None,
              gates: Sequence[str], min_support: int | None, keep: bool, say: Callable[[str], None]) -> dict[str, Any]:
    import readout_sdk

    meta = json.loads((root / "readout.json").read_text(encoding="utf-8"))
    conf = settings(meta)
    if role == "test" and min_support is not None and "min_support" in conf and min_support != conf["min_support"]:
        raise InputRefused(f"--min-support {min_support}: the manifest froze evaluation.min_support at "
                           f"{conf['min_support']} before any test data was seen; a test run keeps it")
    min_support = int(min_support if min_support is not None else conf.get("min_support", DEFAULT_MIN_SUPPORT))
    known = task_of(engine.family_spec).metric_names
    declared = [G.Gate.parse(g, "$.evaluation.gates", known) for g in conf.get("gates", [])] + \
        [G.Gate.parse(g, "--gate", known) for g in gates]
    per_slice = [G.Gate.parse(g, "$.evaluation.slice_gates", known) for g in conf.get("slice_gates", [])]
    root_id = L.root_of(engine.abi)
    history = L.uses(meta, root)
    if parent is not None:  # the release this one replaces is part of its lineage too
        history += L.uses(json.loads((Path(parent) / "readout.json").read_text(encoding="utf-8")), Path(parent))
    described = ds.describe(role)
    used = ds.use(role, content_fields(engine.family_spec))  # row keys on the fields this family's evaluation reads, as calibrate's
    flags, tainted = L.audit(history, used, role, engine.release_id, root_id, str(ds.path))
    golds = gold_values(engine, ds)
    say(f"evaluating {engine.family} release {str(engine.release_id)[:12]} ({engine.target.name}) on "
        f"{ds.path.name}: {len(ds.rows)} rows, role {role}")
    task, cases, measured = measure(engine, ds, golds)
    sl = slices(task, cases, engine, min_support)
    paired, p_slices, p_metrics = None, {}, None
    if parent is not None:
        with readout_sdk.load(parent, target=target) as p_engine:
            if p_engine.family != engine.family:
                raise InputRefused(f"{parent}: the parent is {p_engine.family}, the candidate {engine.family}")
            say(f"evaluating the parent, release {str(p_engine.release_id)[:12]}, on the same rows")
            _, p_cases, p_measured = measure(p_engine, ds)
            p_metrics = p_measured.metrics
            p_slices = {s.name: s for s in slices(task, p_cases, p_engine, min_support)}
            paired = compare(task, cases, p_cases, measured.metrics, p_metrics, p_engine.release_id)
    results = decide_gates(declared, per_slice, measured, sl, p_metrics, p_slices, min_support)
    verdict = G.verdict(results)
    if not results:
        flags.append("no gates declared: nothing was gated" + (", and a test evaluation with nothing gated never "
                                                                 "passes" if role == "test" else ""))
    doc = {"schema": SCHEMA, "artifact": str(root), "family": engine.family, "release_id": engine.release_id,
           "target": engine.target.name, "backend": engine.backend, "role": role, "data": described,
           "task": task.name, "metrics": measured.metrics, "support": measured.support,
           "definitions": measured.definitions, **measured.detail,
           "min_support": min_support, "slices": [s.to_json() for s in sl], "paired": paired,
           "gates": [r.to_json() for r in results], "verdict": verdict, "flags": flags, "tainted": tainted,
           "at": L.now(),
           "cases": [c.to_json() for c in cases]}
    doc = clean(doc)  # no NaN or infinity ever reaches a report
    doc["exit_code"] = exit_code(doc)
    doc["_cases"] = cases  # for plots; dropped before anything is written
    use = L.entry(used, role, "evaluate", doc["release_id"], root_id, at=doc["at"])
    L.append(root_id, use)  # kept on this machine even with keep=False
    if keep:
        lineage = dict(meta.get("lineage") or {})
        lineage["data"] = list(lineage.get("data") or []) + [use]
        keep_in_artifact(root, doc, lineage)
    return doc


def decide_gates(declared: Sequence[G.Gate], per_slice: Sequence[G.Gate], measured: Measured, sl: Sequence[Any],
                 p_metrics: dict[str, Any] | None, p_slices: dict[str, Any], min_support: int) -> list[G.GateResult]:
    """Every declared gate, then each slice gate on every slice with enough support (one NOT_EVALUATED
    result when no slice has it, so a slice gate never silently vanishes)."""
    by_name = {s.name: s for s in sl}
    results = []
    for g in declared:
        base = p_metrics if g.slice is None else (p_slices[g.slice].measured.metrics if g.slice in p_slices else None)
        results.append(G.decide(g, measured.metrics, measured.support, by_name, base, min_support))
    for g in per_slice:
        if not any(s.gated for s in sl):
            results.append(G.GateResult(f"{g.text} [every slice]", g.metric, None, f"{g.op} every slice", None, None,
                                        0, G.NOT_EVALUATED, f"no slice has the minimum support {min_support}"))
        for s in sl:
            if s.gated:
                one = G.Gate(f"{g.text} [{s.name}]", g.metric, s.name, g.op, g.value, g.parent_offset)
                base = p_slices[s.name].measured.metrics if s.name in p_slices else None
                results.append(G.decide(one, measured.metrics, measured.support, by_name, base, min_support))
    return results


def clean(value: Any) -> Any:
    """``value`` with every non-finite float replaced by None (JSON has no NaN; a metric that is not a
    number was not measured)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


def exit_code(doc: dict[str, Any]) -> int:
    """0 when every gate passed; 1 on any FAIL or NOT_EVALUATED gate, a test run with no gate, or a tainted
    test run (its test data was seen by another release of this lineage)."""
    if doc["verdict"] == G.PASS:
        return 1 if doc.get("tainted") else 0
    if not doc["gates"] and doc["role"] != "test":
        return 0  # a measurement run: nothing was claimed
    return 1


def public(doc: dict[str, Any]) -> dict[str, Any]:
    """The report as written (no in-memory cases)."""
    return {k: v for k, v in doc.items() if not k.startswith("_")}


def keep_in_artifact(root: Path, doc: dict[str, Any], lineage: dict[str, Any]) -> None:
    """evaluation.json keeps every run of this release; readout.json its lineage and state. The run is
    appended to the report readout.json lists, read under the artifact's lock (`lifecycle.keep`): a
    concurrent run is not lost, an unlisted file is set aside, and a killed run blocks nothing."""
    from readout_sdk.release.lifecycle import keep

    def extend(kept: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
        if not kept or kept.get("release_id") != doc["release_id"] or not isinstance(kept.get("runs"), list):
            kept = {"schema": SCHEMA, "release_id": doc["release_id"], "runs": []}
        kept["runs"].append(public(doc))
        return kept, {"role": doc["role"], "data": doc["data"]["sha256"], "verdict": doc["verdict"],
                      "gates": len(doc["gates"])}

    keep(root, "evaluation", extend, updates={"lineage": lineage})
