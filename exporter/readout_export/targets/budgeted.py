"""The build step of a budgeted target: search (`readout_export.targets.budget_search`), then prove with the parity harness.

The proof runs the harness on the artifact being staged (its readout.json already written), for this
target only, against the staged fp32 graph on ONNX Runtime (the build has just checked that graph
against eager PyTorch); the candidate is listed only once every gated check passes.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

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
    from readout_export.targets.budget_search import best_reached, recipe, search

    staging, step = p.staging, p.step
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
            pending = recipe(cand, outcome, budget, {"decision": "PENDING"}, machine_id())
            gated, proof = _list_and_prove(t, p, meta, cand, path, pending, rejected)
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


def _mine(t: Target, x: dict[str, Any]) -> bool:
    """Whether ``x`` is ``t``'s own listing in readout.json."""
    return x["format"] == t.format and x["precision"] == t.precision


def _list_and_prove(t: Target, p: Production, meta: dict[str, Any], cand: Any, path: Path, recipe: dict[str, Any],
                    rejected: list[dict[str, str]]) -> tuple[list[Any], dict[str, Any]]:
    """Put candidate ``cand`` (its graph at ``path``) in place as ``t`` and list it in readout.json with its recipe
    (``rejected``: the candidates whose proof failed before it), then prove it: the parity harness on the staged
    artifact, for ``t`` only, against the staged fp32 graph on ONNX Runtime. Returns its gated checks and the proof,
    which its listing records."""
    from readout_parity.harness import Reference, run_parity
    from readout_sdk.targets import open_runner

    staging, fp32_name = p.staging, p.fp32.name
    file = t.file if cand.int8 else fp32_name  # the fp32 graph itself is shared, as bf16's
    if cand.int8:
        shutil.copyfile(path, staging / file)
    else:  # an int8 candidate whose proof failed leaves nothing behind
        (staging / t.file).unlink(missing_ok=True)
    entry = Target(t.format, t.precision, file, sha256_file(staging / file), t.runtime, recipe=recipe).listing()
    meta["targets"][:] = [x for x in meta["targets"] if not _mine(t, x)] + [entry]
    write_meta(staging, meta)
    p.step(f"{t.name}: proving '{cand.label}' with the parity harness on the parity corpus")
    reference = Reference(open_runner(staging, Target.of("onnx-fp32", fp32_name), "onnxruntime", "cpu"),
                          REFERENCE_LABEL)
    try:
        report = run_parity(staging, only=[t.name], reference=reference)
    finally:
        reference.close()
    gated = [c for c in report.checks if c.target == t.name]
    proof = {"decision": "PASS" if gated and all(c.decision == "PASS" for c in gated) else "FAIL",
             "reference": REFERENCE_LABEL, "corpus": report.corpus, "grid": report.grid,
             "checks": [c.to_json() for c in gated]}
    entry["recipe"]["proof"] = proof
    entry["recipe"]["rejected_by_proof"] = list(rejected)
    return gated, proof
