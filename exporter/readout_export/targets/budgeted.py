"""The build step of a budgeted target: search (`readout_export.targets.budget_search`), then prove with the parity harness.

The proof runs the harness on the artifact being staged (its readout.json already written), for this
target only, against the staged fp32 graph on ONNX Runtime (the build has just checked that graph
against eager PyTorch); the candidate is listed only once every gated check passes.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable

from readout_sdk.artifact import sha256_file, write_meta
from readout_sdk.backend import floor_text, machine_id
from readout_sdk.targets import Target

from readout_export.errors import ManifestError
from readout_export.planning.plan import Plan
from readout_export.targets import Production

REFERENCE_LABEL = "the onnx-fp32 graph on ONNX Runtime (checked against eager PyTorch by this build)"


def _where(plan: Plan, t: Target) -> str:
    i = next((k for k, x in enumerate(plan.targets) if x.kind == t.kind), 0)  # stated targets come first, in order
    return f"$.targets[{i}].budget"


def build_budgeted(plan: Plan, t: Target, p: Production, meta: dict[str, Any]) -> None:
    """Search, prove and list the budgeted target ``t`` in ``meta`` (a ManifestError when nothing keeps
    its budget); ``p``: what the build's recipes read (the staged fp32 graph, the record, the family, the
    calibration feeds)."""
    from readout_export.targets.budget_search import best_reached, search

    staging, fp32_name, step = p.staging, p.fp32.name, p.step
    budget, where = dict(t.budget or {}), _where(plan, t)
    work = staging / ".search"  # inside the staging directory: swept with it if the build is killed
    step(f"{t.name}: searching for the fastest graph that keeps {floor_text(budget)} (calibration corpus)")
    try:
        work.mkdir()
        outcome = search(p.fp32, meta["abi"], staging / "tokenizer.json", budget, p.calibration(), work, step, p.family)
        if not outcome.keeping:
            raise ManifestError(where, f"no recipe keeps {floor_text(budget)} on the calibration corpus: "
                                       f"{best_reached(outcome.frontier, budget)}")
        failed: list[str] = []
        rejected: list[dict[str, str]] = []
        for cand, path in outcome.keeping:
            entry = _list_candidate(t, staging, fp32_name, meta, cand, path, recipe_of(cand, outcome, budget))
            gated, proof = _prove(t.name, staging, fp32_name, step, cand)
            entry["recipe"]["proof"] = proof
            entry["recipe"]["rejected_by_proof"] = list(rejected)
            if proof["decision"] == "PASS":
                step(f"{t.name}: kept {floor_text(budget)} on the parity corpus ("
                     + ", ".join(f"{c.metric} {c.measured:.6f}" for c in gated) + f"); {cand.items_per_s:.1f} "
                     f"items/s on the search corpus")
                return
            failed.append(", ".join(f"{c.metric} {c.measured}" for c in gated if c.decision != "PASS") or "not evaluated")
            rejected.append({"label": cand.label, "failed": failed[-1]})
            step(f"{t.name}: the proof failed ({failed[-1]}); trying the next candidate")
        meta["targets"][:] = [x for x in meta["targets"] if not _mine(t, x)]
        (staging / t.file).unlink(missing_ok=True)
        raise ManifestError(where, f"no recipe keeps {floor_text(budget)} on the parity corpus: the "
                                   f"{len(failed)} candidates that kept it on the calibration corpus reached "
                                   + "; ".join(failed))
    finally:
        shutil.rmtree(work, ignore_errors=True)


def recipe_of(cand: Any, outcome: Any, budget: dict[str, float]) -> dict[str, Any]:
    """The candidate's recipe as listed before its proof (`budget_search.recipe`, decision PENDING)."""
    from readout_export.targets.budget_search import recipe

    return recipe(cand, outcome, budget, {"decision": "PENDING"}, machine_id())


def _mine(t: Target, x: dict[str, Any]) -> bool:
    """Whether ``x`` is ``t``'s own listing in readout.json."""
    return x["format"] == t.format and x["precision"] == t.precision


def _list_candidate(t: Target, staging: Path, fp32_name: str, meta: dict[str, Any], cand: Any, path: Path,
                    recipe: dict[str, Any]) -> dict[str, Any]:
    """Put candidate ``cand`` (its graph at ``path``) in place as ``t`` and list it in readout.json, so that the
    parity harness can open it; returns its listing."""
    file = t.file if cand.int8 else fp32_name  # the fp32 graph itself is shared, as bf16's
    if cand.int8:
        shutil.copyfile(path, staging / file)
    else:  # an int8 candidate whose proof failed leaves nothing behind
        (staging / t.file).unlink(missing_ok=True)
    entry = Target(t.format, t.precision, file, sha256_file(staging / file), t.runtime, recipe=recipe).listing()
    meta["targets"][:] = [x for x in meta["targets"] if not _mine(t, x)] + [entry]
    write_meta(staging, meta)
    return entry


def _prove(name: str, staging: Path, fp32_name: str, step: Callable[[str], None],
           cand: Any) -> tuple[list[Any], dict[str, Any]]:
    """The parity harness on the staged artifact, for target ``name`` only, against the staged fp32 graph on ONNX
    Runtime: its gated checks and the proof the recipe records."""
    from readout_parity.harness import Reference, run_parity
    from readout_sdk.targets import open_runner

    step(f"{name}: proving '{cand.label}' with the parity harness on the parity corpus")
    reference = Reference(open_runner(staging, Target.of("onnx-fp32", fp32_name), "onnxruntime", "cpu"),
                          REFERENCE_LABEL)
    try:
        report = run_parity(staging, only=[name], reference=reference)
    finally:
        reference.close()
    gated = [c for c in report.checks if c.target == name]
    proof = {"decision": "PASS" if gated and all(c.decision == "PASS" for c in gated) else "FAIL",
             "reference": REFERENCE_LABEL, "corpus": report.corpus, "grid": report.grid,
             "checks": [c.to_json() for c in gated]}
    return gated, proof
