"""The parity grid: every target x execution provider x padding side x batch width, on real text,
against a reference runner on each example alone (unpadded).

The harness compares runners, as Polygraphy's comparator does: it never builds the reference itself.
The exporter hands it eager PyTorch (`readout_export.reference`); without PyTorch the artifact's own
onnx-fp32 graph on ONNX Runtime's CPU is the reference (:func:`onnx_reference`). Decision-level
metrics are the family's own (`readout_sdk.families`): the same encoder, windows and decoder as the SDK.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from readout_sdk.artifact import Artifact, open_artifact
from readout_sdk.backend import machine_id
from readout_sdk.batching import SIDES, Prepared, feed_for, regroup, split_rows
from readout_sdk.errors import DeviceUnavailable
from readout_sdk.families import Context, Family, get, multi_output
from readout_sdk.runners import Runner
from readout_sdk.targets import ways_to_run

from readout_parity.forms import form_checks
from readout_parity.checks import Check, decide, not_evaluated, target_budgets
from readout_parity.corpus import default_corpus, distinct_items, load_corpus

DEFAULT_WIDTHS = (1, 2, 7, 32)
REFERENCE_ONNX = "the artifact's onnx-fp32 graph on ONNX Runtime CPU, each example alone, unpadded (no PyTorch here)"


@dataclass
class Reference:
    """What the candidates are compared with: a runner (each example alone, unpadded), what it is, and
    runners whose metrics are only reported (e.g. transformers' default position ids, left-padded)."""

    runner: Runner
    label: str
    informative: tuple[tuple[str, Runner], ...] = ()

    def close(self) -> None:
        self.runner.close()
        for _, r in self.informative:
            r.close()


@dataclass
class Report:
    """Everything one parity run decided and measured."""

    artifact: str
    family: str
    corpus: dict[str, Any]
    grid: dict[str, Any]
    checks: list[Check]
    measurements: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    machine: str = ""
    release_id: str | None = None  # the identity this evidence is for (readout_sdk.release.identity)
    reconciliation: dict[str, Any] | None = None  # the semantic record against the source (exporter)
    target_files: dict[str, str] = field(default_factory=dict)  # sha256 of each target's graph, as evaluated

    def counts(self) -> dict[str, int]:
        out = {"PASS": 0, "FAIL": 0, "NOT_EVALUATED": 0}
        for c in self.checks:
            out[c.decision] += 1
        return out

    def exit_code(self, strict: bool = False) -> int:
        counts = self.counts()
        return 1 if counts["FAIL"] or (strict and counts["NOT_EVALUATED"]) else 0


def onnx_reference(art: Artifact) -> Reference:
    """The artifact's onnx-fp32 graph on ONNX Runtime's CPU: the reference a machine without PyTorch has."""
    from readout_sdk.targets import open_runner

    return Reference(open_runner(art.path, art.target("onnx", "fp32"), "onnxruntime", "cpu"), REFERENCE_ONNX)


def run_units(runner: Runner, record: dict[str, Any], units: Sequence[Prepared], side: str,
              width: int) -> list[dict[str, np.ndarray]]:
    """Outputs of every unit, run in input order ``width`` at a time, padded on ``side``; per-row outputs
    keep the rows the mask marks valid. Units with different numbers of choices never share a batch."""
    names = [o["name"] for o in record["outputs"]]
    results: list[dict[str, np.ndarray]] = []
    for start in range(0, len(units), width):
        for run in _runs(list(units[start:start + width])):
            feed = feed_for(record, run, side)
            results += split_rows(record, dict(zip(names, runner.run(names, feed))), feed)
    return results


def _runs(chunk: list[Prepared]) -> list[list[Prepared]]:
    """``chunk`` cut into consecutive runs of units with the same number of encodings (order kept)."""
    runs: list[list[Prepared]] = []
    for u in chunk:
        if runs and len(runs[-1][0].encodings) == len(u.encodings):
            runs[-1].append(u)
        else:
            runs.append([u])
    return runs


def _worst(worst: dict[str, tuple[float, str]], metrics: dict[str, float], where: str) -> None:
    for metric, value in metrics.items():
        better_low = metric.endswith("error")
        old = worst.get(metric)
        if old is None or (value > old[0] if better_low else value < old[0]):
            worst[metric] = (value, where)


def overrides_manifest(art: Artifact) -> dict[str, Any]:
    """The build manifest the artifact keeps (its parity and vector-form budgets), or {}."""
    return art.extra.get("build", {}).get("manifest") or {}


@dataclass
class _Inputs:
    """The corpus as the grid runs it: each distinct item once per distinct input policy, encoded."""

    items: list[Any]
    duplicates: int
    policies: list[Any]
    roles: list[Any]
    groups: list[Any]
    units: list[Prepared]
    lengths: list[int]


def _inputs(fam: Family, ctx: Context, corpus: str | Path | None) -> _Inputs:
    raw = load_corpus(corpus, fam) if corpus else default_corpus(fam)
    # each distinct item once: a duplicate has the reference's very vector, a tie no neighbour ranking can order
    items, duplicates = distinct_items([fam.check_item(i, x) for i, x in enumerate(raw)])
    # every distinct input policy of the declared roles (each prepends its prompt and may exclude its rows from
    # pooling), once: roles whose prompts change nothing answer to their names but are one input
    policies = ctx.roles.distinct()
    roles = [role for role, _ in policies] or [None]
    groups = [g for role in roles for g in fam.encode(ctx, 0, items, role=role)]
    units = [u for g in groups for u in g]
    lengths = [len(e.ids) for u in units for e in u.encodings]
    return _Inputs(items * len(roles), duplicates, policies, roles, groups, units, lengths)


@dataclass
class _Grid:
    """One parity run in progress: what every cell is compared with, and what it has decided so far."""

    art: Artifact
    views: list["View"]
    inputs: _Inputs
    reference: Reference
    ref: Any
    ref_decided: list[Any]
    widths: Sequence[int]
    say: Callable[[str], None]
    checks: list[Check] = field(default_factory=list)
    measurements: list[dict[str, Any]] = field(default_factory=list)

    def measure(self, runner: Runner, tname: str, provider: str) -> list[dict[str, tuple[float, str]]]:
        """The worst value of every metric of every readout over padding sides x batch widths."""
        record, inputs = self.art.record, self.inputs
        worst: list[dict[str, tuple[float, str]]] = [{} for _ in self.views]
        for side in SIDES:
            for width in self.widths:
                self.say(f"{tname} on {provider}: {side} padding, batch {width}")
                got = regroup(run_units(runner, record, inputs.units, side, width), inputs.groups)
                for k, (_, v_fam, v_ctx, mine) in enumerate(self.views):
                    _worst(worst[k], v_fam.metrics(v_ctx, inputs.items, mine(got), mine(self.ref), inputs.groups,
                                                   self.ref_decided[k]), f"{side} padding, batch {width}")
        return worst

    def gate(self, target: Any, provider: str, worst: list[dict[str, tuple[float, str]]]) -> None:
        """Each readout gated on its own, one row per budgeted metric; the rest reported, never gated."""
        overrides = overrides_manifest(self.art).get("parity")
        tname = target.name
        for k, (output, v_fam, _, _) in enumerate(self.views):
            budgets = target_budgets(target, overrides if output is None else None, v_fam)
            gated = 0
            for metric, (value, where) in sorted(worst[k].items()):
                if metric in budgets:
                    self.checks.append(replace(decide(tname, provider, metric, value, budgets[metric],
                                                      self.reference.label, where), output=output or ""))
                    gated += 1
                else:
                    self.measurements.append({"target": tname, "provider": provider, "metric": metric,
                                              "measured": value, "worst_case": where, "gated": False,
                                              **({"output": output} if output else {})})
            if not gated:  # ran, but nothing was gated: never a silent pass
                self.checks.append(replace(not_evaluated(tname, provider, f"no metric of {v_fam.name} has a "
                                                         f"budget at {target.precision} (measured: "
                                                         f"{', '.join(sorted(worst[k]))})"), output=output or ""))

    def target(self, target: Any) -> None:
        """Every way this machine can run ``target``, measured and gated (or NOT_EVALUATED, saying why)."""
        for provider, make in ways_to_run(self.art.path, target, self.art.record):
            if isinstance(make, str):  # its device or runtime is not on this machine
                self.checks.append(not_evaluated(target.name, provider, make, absent=True))
                continue
            try:
                runner = make()
            except DeviceUnavailable as e:  # e.g. an engine built for another GPU: not evaluated, never a crash
                self.checks.append(not_evaluated(target.name, provider, str(e)))
                continue
            provider = runner.execution.get("provider", provider)  # what runs (TensorRT's provider leads on CUDA)
            try:
                worst = self.measure(runner, target.name, provider)
            finally:
                runner.close()
            self.gate(target, provider, worst)

    def forms(self, ctx: Context) -> None:
        """What each declared vector form costs against the full vector."""
        inputs = self.inputs
        per_role = len(inputs.items) // len(inputs.roles)
        names = [r.name if r is not None else None for r in inputs.roles for _ in range(per_role)]
        budgets = ((overrides_manifest(self.art).get("vectors") or {}).get("min")) or {}
        more, measured = form_checks(ctx.forms, self.ref_decided[0], names, budgets, self.reference.label)
        self.checks += more
        self.measurements += measured

    def pending(self, only: Sequence[str] | None) -> None:
        """Declared engines not compiled yet: never a silent pass."""
        for pending in self.art.extra.get("compile", []):
            if only is None or pending["target"] in only:
                self.checks.append(not_evaluated(
                    pending["target"], "TensorRT", f"not compiled yet: run `readout-export compile {self.art.path} "
                    f"--target {pending['target']}` on the machine that will run it"))

    def informative(self, fam: Family, ctx: Context) -> None:
        """Runners whose metrics are reported, never gated (e.g. transformers' default position ids)."""
        inputs = self.inputs
        for label, runner in self.reference.informative:
            got = regroup(run_units(runner, self.art.record, inputs.units, "left", 7), inputs.groups)
            for metric, value in fam.metrics(ctx, inputs.items, got, self.ref, inputs.groups,
                                             self.ref_decided[0]).items():
                self.measurements.append({"target": label, "provider": runner.backend, "metric": metric,
                                          "measured": value, "worst_case": "left padding, batch 7", "gated": False})


def run_parity(path: str | Path, corpus: str | Path | None = None, widths: Sequence[int] = DEFAULT_WIDTHS,
               say: Callable[[str], None] = lambda _m: None, reference: Reference | None = None,
               only: Sequence[str] | None = None) -> Report:
    """Run the grid for every target of the artifact at ``path`` (or the targets named in ``only``) and
    decide every budgeted metric. ``reference``: the runner candidates are compared with (the exporter
    passes eager PyTorch); by default the artifact's own onnx-fp32 graph (:func:`onnx_reference`).
    A target x provider that ran but has no budgeted metric is NOT_EVALUATED, never PASS."""
    start = time.monotonic()
    art: Artifact = open_artifact(path)
    record = art.record
    views = _views(art)  # one per readout: a multi-output artifact's each gated by its own family
    _, fam, ctx, _ = views[0]  # every readout of one artifact reads the same inputs
    inputs = _inputs(fam, ctx, corpus)
    ref_given = reference is not None
    reference = reference or onnx_reference(art)
    targets = [t for t in art.targets if only is None or t.name in only]
    try:
        say(f"reference: {reference.label} ({len(inputs.items)} items, {len(inputs.units)} parts)")
        ref = regroup(run_units(reference.runner, record, inputs.units, "right", 1), inputs.groups)
        # once per readout; every grid cell compares with it
        ref_decided = [v_fam.decisions(v_ctx, inputs.items, mine(ref), inputs.groups)
                       for _, v_fam, v_ctx, mine in views]
        grid = _Grid(art, views, inputs, reference, ref, ref_decided, widths, say)
        for target in targets:
            grid.target(target)
        if ctx.forms and only is None:
            grid.forms(ctx)
        grid.pending(only)
        grid.informative(fam, ctx)
    finally:
        if not ref_given:
            reference.close()
    return Report(str(art.path), record["family"], _corpus_info(inputs, corpus, record, reference.label),
                  _grid_info(targets, widths), grid.checks, grid.measurements, time.monotonic() - start,
                  machine_id(), (record.get("identity") or {}).get("release_id"),
                  target_files={t.name: t.sha256 for t in targets})


def _corpus_info(inputs: _Inputs, corpus: str | Path | None, record: dict[str, Any], label: str) -> dict[str, Any]:
    return {"source": str(corpus) if corpus else "built-in", "items": len(inputs.items), "parts": len(inputs.units),
            "min_tokens": min(inputs.lengths), "max_tokens": max(inputs.lengths),
            "max_length": record["input"]["max_length"], "reference": label,
            "roles": [name for _, names in inputs.policies for name in names],
            "input_policies": [list(names) for _, names in inputs.policies],
            "duplicates_dropped": inputs.duplicates}


def _grid_info(targets: Sequence[Any], widths: Sequence[int]) -> dict[str, Any]:
    from readout_sdk.targets.backends import onnxruntime_module

    return {"targets": [t.name for t in targets], "providers": onnxruntime_module().get_available_providers(),
            "padding_sides": list(SIDES), "batch_widths": list(widths)}


View = tuple[str | None, Family, Context, Callable[[Any], Any]]


def _views(art: Artifact) -> list[View]:
    """What parity gates, one entry per readout: (output name or None, family, context, a function from the
    graph's outputs per item and part to the readout's own, under its family's names). An artifact with one
    readout has one entry, its outputs as they are; a multi-output artifact one per readout
    (`readout_sdk.families.multi_output`), each read as its single-family record."""
    tokenizer = art.path / art.tokenizer_file
    if not multi_output.is_multi(art.record):
        return [(None, get(art.record["family"]), Context(art.record, tokenizer), lambda outs: outs)]

    def renaming(part: multi_output.Readout) -> Callable[[Any], Any]:
        return lambda outs: [[part.renamed(o) for o in g] for g in outs]

    return [(name, part.family, Context(part.record, tokenizer), renaming(part))
            for name, part in multi_output.readouts(art.record).items()]
