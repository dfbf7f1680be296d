"""Budgeted targets (``"precision": "auto"``): the fastest graph that keeps a declared parity budget.

The search, on a calibration corpus that is not the parity corpus (:func:`search_corpus`: recombined
texts of 1..110 words at a calibration seed, none of them a parity sentence; the parity harness uses
its built-in corpus):

1. NNCF quantizes the fp32 graph once (the onnx-int8-openvino recipe, nothing left out), and
   `readout_export.targets.mixed` ranks its int8 nodes by the error each adds on its own (measured on the
   calibration feeds).
2. Candidates are measured end to end on the search corpus, each on OpenVINO as the SDK runs it:
   the fp32 graph (and the bf16 inference precision where the CPU has it), and the int8 graph with the
   k most sensitive nodes put back in float, k on a doubling schedule and then bisected down to the
   fewest nodes that keep the budget. Every candidate's parity (the family's own metrics, as the
   harness computes them) and items/s form the measured frontier.
3. The fastest candidate that keeps the budget on the search corpus is proven by the parity harness on
   the parity corpus (every padding side and batch width); if the proof fails, the next fastest is
   tried. A budget nothing keeps is a build failure naming the best parity reached.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

SEARCH_ITEMS = 64
SEARCH_SEED = 20261201  # calibration uses quantize.CALIBRATION_SEED; the bench and parity corpora differ
# texts of 1..110 words: the parity corpus's worst items are its 1-3 word texts, and a search corpus
# starting at 5 words (the bench's) rated int8 mixes 0.005-0.011 min cosine kinder than the proof found them
SEARCH_WORDS = (1, 110)
SEARCH_WIDTH = 16


def search_corpus(family: Any) -> list[Any]:
    """The texts (or pairs, or choices) the search measures candidates on: seeded, as short as the parity
    corpus's shortest texts, and disjoint from it (a short recombined text can be one of its sentences)."""
    from readout_parity.corpus import default_corpus, mixed_corpus

    proof = {json.dumps(x) for x in default_corpus(family)}
    drawn = mixed_corpus(family, 2 * SEARCH_ITEMS, SEARCH_SEED, *SEARCH_WORDS)
    return [x for x in drawn if json.dumps(x) not in proof][:SEARCH_ITEMS]


@dataclass
class Candidate:
    """One measured point of the frontier."""

    label: str
    inference_precision: str
    float_nodes: list[str]          # int8 nodes put back in float ([] for the all-int8 graph)
    int8: bool                      # False: the fp32 graph itself
    parity: dict[str, float] = field(default_factory=dict)
    items_per_s: float = 0.0
    meets: bool = False
    passes: int = 0                 # timed passes behind items_per_s

    def summary(self) -> dict[str, Any]:
        out = asdict(self)
        out["float_nodes"] = len(self.float_nodes)
        return out


def _candidate_runner(cand: Candidate, path: Path) -> Any:
    """The runner a budgeted target of this candidate's recipe gets (`readout_sdk.targets.open_runner`), one
    stream: the passes run one batch at a time. No sha256: candidates are not kept in the compiled cache."""
    from readout_sdk.targets import Target, open_runner

    target = Target.of("onnx-auto", path.name, recipe={"inference_precision": cand.inference_precision})
    return open_runner(path.parent, target, "openvino", "cpu", streams=1)


class Search:
    """Candidate graphs of one fp32 graph, measured on the search corpus against the fp32 graph."""

    def __init__(self, fp32_path: Path, record: dict[str, Any], tokenizer: Path, budget: dict[str, float],
                 work: Path, say: Callable[[str], None], family: Any):
        from readout_parity.harness import run_units
        from readout_sdk.batching import regroup
        from readout_sdk.families import Context
        from readout_sdk.targets import Target, open_runner

        self.fp32_path, self.record, self.budget, self.work, self.say = fp32_path, record, budget, work, say
        self.family = family  # the build's (`Plan.spec`): the record's family, resolved once
        self.ctx = Context(record, tokenizer)
        self.items = [self.family.check_item(i, x) for i, x in enumerate(search_corpus(self.family))]
        self.groups = self.family.encode(self.ctx, 0, self.items)
        self.units = [u for g in self.groups for u in g]
        self._run_units, self._regroup = run_units, regroup
        with open_runner(fp32_path.parent, Target.of("onnx-fp32", fp32_path.name), "onnxruntime", "cpu") as ref_runner:
            self.ref = regroup(run_units(ref_runner, record, self.units, "right", 1), self.groups)
        self.ref_decided = self.family.decisions(self.ctx, self.items, self.ref, self.groups)
        self.count = 0

    def measure(self, cand: Candidate, path: Path) -> Candidate:
        """Parity on the search corpus (that pass also warms the graph up), then items/s of one timed pass.
        One OpenVINO stream with every core: the passes run one batch at a time."""
        from readout_sdk.backend import meets

        runner = _candidate_runner(cand, path)
        try:
            out = self._run_units(runner, self.record, self.units, "right", SEARCH_WIDTH)
            start = time.perf_counter()
            self._run_units(runner, self.record, self.units, "right", SEARCH_WIDTH)
            best = time.perf_counter() - start
        finally:
            runner.close()
        got = self._regroup(out, self.groups)
        cand.parity = {m: float(v) for m, v in self.family.metrics(self.ctx, self.items, got, self.ref, self.groups,
                                                                    self.ref_decided).items()}
        cand.items_per_s = len(self.items) / best
        cand.meets = meets(cand.parity, self.budget)
        cand.passes = 1
        self.count += 1
        self.say(f"  {cand.label}: {_parity_text(cand.parity, self.budget)}, {cand.items_per_s:.1f} items/s"
                 f"{'' if cand.meets else ' (misses the budget)'}")
        return cand

    def retime(self, cand: Candidate, path: Path, passes: int) -> None:
        """items/s again: the median of ``passes`` timed passes after a warm-up pass."""
        runner = _candidate_runner(cand, path)
        try:
            self._run_units(runner, self.record, self.units, "right", SEARCH_WIDTH)
            times = []
            for _ in range(passes):
                start = time.perf_counter()
                self._run_units(runner, self.record, self.units, "right", SEARCH_WIDTH)
                times.append(time.perf_counter() - start)
        finally:
            runner.close()
        cand.items_per_s = len(self.items) / float(np.median(times))
        cand.passes = passes
        self.say(f"  timed again: {cand.label}: {cand.items_per_s:.1f} items/s (median of {passes} passes)")


def _parity_text(parity: dict[str, float], budget: dict[str, float]) -> str:
    return ", ".join(f"{m} {parity.get(m, float('nan')):.6f}" for m in budget)


def _schedule(n: int) -> list[int]:
    """0, 1, 2, 4, ... below n, then n - 1: with all n nodes in float the graph is the fp32 graph itself,
    measured as its own candidate."""
    ks, k = [0], 1
    while k < n - 1:
        ks.append(k)
        k *= 2
    return ks + ([n - 1] if n > 1 else [])


FINAL_PASSES = 3  # the candidates that keep the budget are timed again, this many passes each (median)
FINALISTS = 3


@dataclass
class Outcome:
    """What the search found: candidates that keep the budget, fastest first, and everything measured."""

    keeping: list[tuple[Candidate, Path]]
    frontier: list[Candidate]
    ranking: list[tuple[str, float]]   # int8 nodes by measured local error, most sensitive first
    int8_nodes: int
    seconds: float


def search(fp32_path: Path, record: dict[str, Any], tokenizer: Path, budget: dict[str, float],
           calibration: list[dict[str, np.ndarray]], work: Path, say: Callable[[str], None], family: Any) -> Outcome:
    """Run the search of the module docstring; candidate graphs are written under ``work``; ``family``: the
    record's, as the build resolved it (`Plan.spec`)."""
    import onnx

    from readout_export.targets.mixed import int8_units, local_errors, restore_float
    from readout_export.targets.quantize import quantize_static_openvino
    from readout_sdk.runners import cpu_has_bf16

    start = time.monotonic()
    s = Search(fp32_path, record, tokenizer, budget, work, say, family)
    precisions = ["f32"] + (["bf16"] if cpu_has_bf16() else [])
    frontier: list[tuple[Candidate, Path]] = []
    for p in precisions:
        frontier.append((s.measure(Candidate(f"fp32 graph at {p}", p, [], False), fp32_path), fp32_path))
    say(f"  quantizing every MatMul with NNCF on {len(calibration)} calibration feeds")
    all_int8 = work / "int8-all.onnx"
    quantize_static_openvino(fp32_path, all_int8, calibration, keep_narrowing=False)
    quantized, fp32 = onnx.load(str(all_int8)), onnx.load(str(fp32_path))
    units = int8_units(quantized, fp32)
    errors = local_errors(fp32, units, calibration[:32])
    ranking = sorted(errors.items(), key=lambda kv: -kv[1])
    order = [name for name, _ in ranking]

    def variant(k: int, p: str) -> tuple[Candidate, Path]:
        path = all_int8 if k == 0 else work / f"int8-float{k}.onnx"
        if k and not path.exists():
            model = restore_float(quantized, fp32, order[:k])
            _copy_metadata(quantized, model)
            onnx.save(model, str(path))
        label = f"int8, {k} most sensitive of {len(order)} int8 nodes in float, rest at {p}"
        return s.measure(Candidate(label, p, order[:k], True), path), path

    for p in precisions:
        tried: dict[int, tuple[Candidate, Path]] = {}
        low, high = None, None
        for k in _schedule(len(order)):
            tried[k] = variant(k, p)
            if tried[k][0].meets:
                high = k
                break
            low = k
        if high is None:  # nothing below n kept it: only the fp32 graph (measured above) does
            frontier += tried.values()
            continue
        if low is not None:  # bisect to the fewest float nodes that keep the budget
            while high - low > 1:
                mid = (low + high) // 2
                tried[mid] = variant(mid, p)
                low, high = (low, mid) if tried[mid][0].meets else (mid, high)
        frontier += tried.values()
    keeping = sorted((fp for fp in frontier if fp[0].meets), key=lambda fp: -fp[0].items_per_s)
    # one pass each is noisy: the fastest few and the fp32 graph are timed again before the choice
    finalists = keeping[:FINALISTS] + [fp for fp in keeping[FINALISTS:] if not fp[0].int8]
    for cand, path in finalists:
        s.retime(cand, path, FINAL_PASSES)
    timed = {id(fp[0]) for fp in finalists}
    keeping = sorted(finalists, key=lambda fp: -fp[0].items_per_s) + [fp for fp in keeping if id(fp[0]) not in timed]
    return Outcome(keeping, [c for c, _ in frontier], ranking, len(order), time.monotonic() - start)


def _copy_metadata(src: Any, dst: Any) -> None:
    """The ABI record travels in metadata_props; every candidate graph carries it."""
    del dst.metadata_props[:]
    for p in src.metadata_props:
        entry = dst.metadata_props.add()
        entry.key, entry.value = p.key, p.value


def best_reached(frontier: list[Candidate], budget: dict[str, float]) -> str:
    """The candidate closest to the budget, for the failure message."""
    metric = next(iter(budget))
    lower = metric.endswith("error")
    pick = (min if lower else max)(frontier, key=lambda c: c.parity.get(metric, float("inf") if lower else -1.0))
    return f"best {metric} reached {pick.parity.get(metric, float('nan')):.6f} ({pick.label})"


def recipe(chosen: Candidate, outcome: Outcome, budget: dict[str, float], proof: dict[str, Any],
           machine: str) -> dict[str, Any]:
    """What readout.json keeps about a budgeted target: the budget, the choice, the frontier, the machine."""
    from readout_export.targets.quantize import CALIBRATION_ITEMS, CALIBRATION_SEED

    return {
        "budget": dict(budget),
        "chosen": chosen.label,
        "inference_precision": chosen.inference_precision,
        "int8": chosen.int8,
        "float_nodes": list(chosen.float_nodes),
        "int8_nodes": (outcome.int8_nodes - len(chosen.float_nodes)) if chosen.int8 else 0,
        "search": {"calibration": {"items": CALIBRATION_ITEMS, "seed": CALIBRATION_SEED},
                   "corpus": {"items": SEARCH_ITEMS, "seed": SEARCH_SEED, "words": list(SEARCH_WORDS),
                              "batch_width": SEARCH_WIDTH},
                   "sensitivity": [{"node": n, "local_error": round(e, 6)} for n, e in outcome.ranking],
                   "frontier": [c.summary() for c in outcome.frontier], "seconds": round(outcome.seconds, 1)},
        "proof": proof,
        "tuned_on": machine,
    }
