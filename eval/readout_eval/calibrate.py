"""`calibrate`: fit the calibration layer on a calibration split and write it as a new artifact.

The new artifact's graphs and tokenizer are the parent's, byte for byte; its record is the graphs' own
record with the fitted overlay (`readout_sdk.calibration`), so `diff` against the parent shows only the
calibration and decision layers, raw outputs are unchanged, and every path that loads it (SDK, Triton,
PyTriton, Ray) applies the calibration because the family's decoder reads it from the record.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from readout_sdk.artifact import open_artifact, read_onnx_record
from readout_sdk.atomic import write_atomic
from readout_sdk.calibration import SCHEME, overlay
from readout_sdk.errors import InputRefused
from readout_eval import data as D
from readout_eval import calibrators as F
from readout_eval.tasks.fields import content_fields
from readout_eval import lineage as L
from readout_eval.run import measure
from readout_eval.tasks import TASKS
from readout_sdk.release.lifecycle import derive_from
from readout_sdk.staging import place, staged

NOT_COPIED = ("parity", "evaluation", "lifecycle", "lineage", "bench", "compatibility")  # evidence of the parent's release


def calibrate(artifact: str | Path, data: str | Path, output: str | Path, coverage: float | None = None,
              risk: float | None = None, precision: float | None = None, target: str | None = None,
              say: Callable[[str], None] = lambda m: None) -> dict[str, Any]:
    """Fit what the family's calibrators allow on ``data`` (role calibration) and write the calibrated
    artifact to ``output``; return a summary (release ids, what was fitted, on what data, and the
    split-role audit's flags)."""
    import readout_sdk

    root, out = Path(artifact), Path(output).absolute()
    _check_request(root, out, coverage, risk, precision)
    ds = D.read(data)
    described = ds.describe("calibration")
    engine = readout_sdk.load(root, target=target)
    try:  # the engine is released whatever the fit refuses
        meta = json.loads((root / "readout.json").read_text(encoding="utf-8"))
        root_id = L.root_of(engine.abi)
        used = ds.use("calibration", content_fields(engine.family_spec))  # row keys read the fields this family's evaluation reads
        flags, _ = L.audit(L.uses(meta, root), used, "calibration", engine.release_id, root_id, str(ds.path))
        for flag in flags:  # an overlap too small to refuse is still the user's to know about
            say(f"flag: {flag}")
        wants = _Wants.of(engine, coverage, risk)
        say(f"fitting on {ds.path.name} ({len(ds.rows)} rows, role calibration) for {engine.family} release "
            f"{str(engine.release_id)[:12]}")
        fit = _Fit(engine, ds, described, say)
        if wants.temperature or wants.abstention:
            fit.single_label(wants, coverage, risk)
        if wants.thresholds:
            fit.thresholds(precision)
        if wants.null:
            fit.null_threshold()
        if fit.decision:
            fit.decision["fitted"] = {"method": fit.fitted, "data": described}
        art = engine.artifact
    finally:
        engine.close()
    graph = next((t for t in art.targets if t.kind.onnx), None)
    if graph is None:
        raise InputRefused(f"{root}: no ONNX target to read the graphs' record from")
    record = overlay(read_onnx_record(root / graph.file), fit.calibration, fit.decision)
    use = L.entry(used, "calibration", "calibrate", art.identity.release_id if art.identity else None,
                  root_id, produced=record["identity"]["release_id"])
    write_artifact(root, out, meta, record, L.uses(meta, root) + [use])  # the new artifact carries what it knows
    L.append(root_id, use)
    return {"artifact": str(out), "parent_release_id": art.identity.release_id if art.identity else None,
            "release_id": record["identity"]["release_id"], "calibration": fit.calibration,
            "decision": {k: v for k, v in fit.decision.items() if k != "fitted"}, "fitted": fit.fitted,
            "data": described, "flags": flags}


def _check_request(root: Path, out: Path, coverage: float | None, risk: float | None,
                   precision: float | None) -> None:
    """Refuse what can never be written or fitted, before any fitting."""
    if coverage is not None and risk is not None:
        raise InputRefused("give --coverage or --risk for abstention, not both")
    for name, v in (("--coverage", coverage), ("--risk", risk), ("--precision", precision)):
        if v is not None and not 0 < v <= 1:
            raise InputRefused(f"{name} must be in (0, 1], got {v}")
    if out.exists():
        raise InputRefused(f"{out}: already exists; calibrate writes a new artifact")
    source = root.resolve()
    if source == out.resolve() or source in out.resolve().parents:  # a folder in the artifact is not listed in it
        raise InputRefused(f"{out}: inside the artifact it calibrates ({root}); write the new artifact beside it")
    for parent in out.parents:  # a path under a file can never be written
        if parent.exists():
            if not parent.is_dir():
                raise InputRefused(f"{out}: under {parent}, which is a file")
            break


@dataclass(frozen=True)
class _Wants:
    """Which calibrators this family allows and this request asks for."""

    temperature: bool
    abstention: bool
    thresholds: bool
    null: bool

    @classmethod
    def of(cls, engine: Any, coverage: float | None, risk: float | None) -> "_Wants":
        fam, section = engine.family_spec, engine.abi["output"]
        wants = cls(temperature="temperature" in fam.calibrators and section["score_type"] == "softmax",
                    abstention="abstention" in fam.calibrators and bool(coverage or risk),
                    thresholds="thresholds" in fam.calibrators,
                    null="null_threshold" in fam.calibrators and section.get("null_policy") == "cls")
        if not (wants.temperature or wants.abstention or wants.thresholds or wants.null):
            raise InputRefused(f"nothing to calibrate for {engine.family} ({section['score_type']} scores): "
                               f"calibrators here: {', '.join(fam.calibrators) or 'none'}"
                               + ("; abstention needs --coverage or --risk" if "abstention" in fam.calibrators else ""))
        return wants


@dataclass
class _Fit:
    """What one calibration run fitted: the record's calibration and decision overlays, and the fits' details."""

    engine: Any
    ds: Any
    described: dict[str, Any]
    say: Callable[[str], None]
    calibration: dict[str, Any] | None = None
    decision: dict[str, Any] = field(default_factory=dict)
    fitted: dict[str, Any] = field(default_factory=dict)

    def single_label(self, wants: _Wants, coverage: float | None, risk: float | None) -> None:
        """Temperature scaling and/or abstention (the abstention fitted on the temperature-scaled scores)."""
        engine, ds = self.engine, self.ds
        task = TASKS["single_label"]
        golds = [task.gold(ds, r, engine) for r in ds.rows]
        cases = task.cases(engine, ds, golds)
        t = F.temperature(engine, cases) if wants.temperature else {"temperature": 1.0}
        if wants.temperature:
            self.calibration = {"scheme": SCHEME, "method": "temperature",
                                "parameters": {"temperature": t["temperature"]}, "data": self.described,
                                "metrics": {"nll_before": t["nll_before"], "nll_after": t["nll_after"]}}
            self.say(f"temperature {t['temperature']:.4f}: NLL {t['nll_before']:.4f} -> {t['nll_after']:.4f}")
        if wants.abstention:
            ctx = copy.copy(engine.context)
            ctx.temperature = t["temperature"]
            probs = np.array([engine.family_spec.class_probabilities(ctx, c.extra["outs"]) for c in cases])
            correct = probs.argmax(1) == np.array(golds)
            a = F.abstention(probs.max(1), correct, coverage, risk)
            self.decision["abstention"] = {k: v for k, v in a.items() if k in ("min_score", "coverage", "risk")}
            self.fitted["abstention"] = a
            self.say(f"abstention below {a['min_score']:.4f}: coverage {a['achieved_coverage']:.3f}, "
                     f"risk {a['achieved_risk']:.3f}")

    def thresholds(self, precision: float | None) -> None:
        """Per-label thresholds (multilabel), at a minimum precision if one was given."""
        engine = self.engine
        _, cases, _ = measure(engine, self.ds)
        th = F.thresholds(engine.labels, np.stack([c.extra["scores"] for c in cases]),
                          np.stack([c.extra["y"] for c in cases]), engine.abi["output"]["thresholds"], precision)
        self.decision["thresholds"] = th["thresholds"]
        self.fitted["thresholds"] = th
        self.say(f"thresholds {', '.join(f'{lab} {v:.4f}' for lab, v in zip(engine.labels, th['thresholds']))}")

    def null_threshold(self) -> None:
        """Extractive QA's null-answer threshold."""
        _, cases, _ = measure(self.engine, self.ds)
        n = F.null_threshold(cases)
        self.decision["null_threshold"] = n["null_threshold"]
        self.fitted["null_threshold"] = n
        self.say(f"null answer when its score exceeds the best span's by more than {n['null_threshold']:.4f}")


def write_artifact(parent: Path, out: Path, meta: dict[str, Any], record: dict[str, Any],
                   history: list[dict[str, Any]]) -> None:
    """Copy the parent's tokenizer and graphs and write the new readout.json, in a staging directory renamed
    into place: nothing half-written ever looks like an artifact."""
    with staged(out, "calibrated") as staging:  # one writer per output; what killed runs left is swept
        if out.exists():  # placed by a run that held the lock before this one
            raise InputRefused(f"{out} exists already; choose another --output")
        files = {meta["tokenizer"]["file"], *(t["file"] for t in meta["targets"])}
        for name in sorted(files):
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(parent / name, staging / name)
        new = {k: v for k, v in meta.items() if k not in NOT_COPIED}
        new["abi"] = record
        new["lineage"] = {"data": history, "parent": {"release_id": (meta["abi"].get("identity") or {}).get("release_id"),
                                                      "path": str(parent.resolve())}}
        new["lifecycle"] = derive_from(staging, record, {}).to_json()
        write_atomic(staging / "readout.json", (json.dumps(new, indent=2, sort_keys=True, allow_nan=False)
                                                 + "\n").encode("utf-8"))
        open_artifact(staging)  # it must verify as any other (hashes, graph records) before it is in place
        os.chmod(staging, 0o755)  # readable by a server running as another user
        place(staging, out)
