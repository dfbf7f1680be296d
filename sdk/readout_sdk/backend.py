"""Choosing what runs: target x backend, from what the registry (`readout_sdk.targets`) says each target
kind and backend is, the device asked for and the artifact's kept evidence."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from readout_sdk.errors import DeviceUnavailable

from readout_sdk.targets.backends import BACKENDS, installed
from readout_sdk.targets.kinds import precision_rank


def machine_id() -> str:
    """What makes CPU measurements comparable: architecture, CPU model and the instruction sets that
    change kernels (bench and parity results kept in an artifact are used only on the same kind of CPU)."""
    import platform

    model, flags = platform.processor() or "", set()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name") and not model.strip():
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                elif line.startswith(("flags", "Features")):
                    flags = set(line.split(":", 1)[1].split())
                    break
    except OSError:
        pass
    isa = sorted(flags & {"avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8", "asimddp"})
    return f"{platform.machine()} | {model} | {' '.join(isa)}"


@dataclass(frozen=True)
class Selection:
    """The target and backend a load picked, and why."""

    target: Any
    backend: str
    reason: str


@dataclass(frozen=True)
class Evidence:
    """What an artifact keeps about its targets on this kind of machine, for this release: the worst value
    of each parity metric per (target, backend) whose every parity check passed, and bench items/s."""

    parity: dict[tuple[str, str], dict[str, float]]
    speed: dict[tuple[str, str], float]


def meets(worst: dict[str, float], floor: dict[str, float]) -> bool:
    """Whether measured worst values meet a floor (names ending in 'error' are maxima, the rest minima)."""
    for metric, bound in floor.items():
        value = worst.get(metric)
        if value is None or (value > bound if metric.endswith("error") else value < bound):
            return False
    return True


def floor_text(floor: dict[str, float]) -> str:
    return ", ".join(f"{m} {'<=' if m.endswith('error') else '>='} {v:g}" for m, v in floor.items())


def _candidates(targets, precision: str | None, backend: str, device: str,
                name: str | None = None) -> list[tuple[Any, str]]:
    pairs = []
    for t in targets:
        if name is not None and t.name != name:
            continue
        if precision is not None and t.precision != precision:
            continue
        for b in t.backends:
            spec = BACKENDS[b]
            if backend != "auto" and b != backend:
                continue
            if device != "auto" and not spec.runs_on(device):
                continue
            if spec.compiled and device != "cuda" and backend != b and name is None:
                continue  # engines run on one GPU: on device "auto" only when asked for by backend or name
            pairs.append((t, b))
    return pairs


def _default_rank(pair: tuple[Any, str]) -> tuple[int, int, int, int]:
    t, b = pair
    return (0 if BACKENDS[b].compiled else 1,  # on a GPU, a compiled engine first
            precision_rank(t.precision), 0 if t.kind.default else 1, t.backends.index(b))


def choose(targets, precision: str | None, device: str, backend: str = "auto",
           floor: dict[str, float] | None = None, evidence: Evidence | None = None,
           target: str | None = None) -> Selection:
    """Pick (target, backend). Explicit choices are honoured or refused with what exists. Otherwise the
    most precise target, unless the artifact declares a serving ``floor`` (``serving.min_parity``): then the
    fastest pair whose kept parity on this kind of machine meets it (``evidence``), the most precise pair
    where none is measured. A bench alone never changes the pick: only a declared floor lets it."""
    if backend != "auto" and backend not in BACKENDS:
        raise DeviceUnavailable(f"unknown backend {backend!r}; expected {', '.join(map(repr, BACKENDS))} or 'auto'")
    if backend != "auto" and device != "auto" and not BACKENDS[backend].runs_on(device):
        raise DeviceUnavailable(f"backend {backend!r} runs on device "
                                f"{' or '.join(map(repr, BACKENDS[backend].devices))} in this release; "
                                f"use device={BACKENDS[backend].devices[0]!r}")
    have = ", ".join(f"{t.name} ({'/'.join(t.backends) or 'no SDK backend'})" for t in targets)
    pairs = _candidates(targets, precision, backend, device, target)
    if not pairs:
        exists = [t for t in targets if (target is None or t.name == target)
                  and (precision is None or t.precision == precision)]
        if not exists:
            what = f"target {target!r}" if target else f"precision {precision!r}"
            raise DeviceUnavailable(f"{what} is not in this artifact (it has: {have})")
        where = f"backend {backend!r} on device {device!r}" if backend != "auto" else f"device {device!r}"
        what = (f"{target or f'precision {precision!r}'} cannot run" if target or precision
                else "none of this artifact's targets can run")
        raise DeviceUnavailable(f"{what} on {where} (it has: {have}); bf16 runs on OpenVINO, "
                                "OpenVINO on the CPU, TensorRT engines on CUDA")
    runnable = [p for p in pairs if installed(p[1])]
    if not runnable:
        raise DeviceUnavailable(f"{pairs[0][0].name} runs on {pairs[0][1]}, which is not installed: "
                                f"{BACKENDS[pairs[0][1]].install}")
    explicit = precision is not None or target is not None or backend != "auto"
    best = min(runnable, key=_default_rank)
    if explicit:
        return Selection(best[0], best[1], "requested")
    if not floor:
        return Selection(best[0], best[1], "most precise target (the artifact declares no serving.min_parity floor)")
    ev = evidence or Evidence({}, {})  # kept reports are CPU measurements: the loader passes none on a GPU
    eligible = [p for p in runnable if meets(ev.parity.get((p[0].name, p[1]), {}), floor)]
    measured = [p for p in eligible if (p[0].name, p[1]) in ev.speed]
    if measured:
        pick = max(measured, key=lambda p: ev.speed[(p[0].name, p[1])])
        key = (pick[0].name, pick[1])
        worst = ev.parity.get(key, {})
        shown = ", ".join(f"{m} {worst[m]:.6g}" for m in floor if m in worst) or "the most precise target"
        return Selection(pick[0], pick[1], f"fastest target whose kept parity meets serving.min_parity "
                                           f"({floor_text(floor)}): {pick[0].name} on {pick[1]}, {shown} in "
                                           f"parity.json, {ev.speed[key]:.0f} items/s in bench.json")
    return Selection(best[0], best[1], f"most precise target: no kept bench on this kind of machine ranks targets whose "
                                       f"parity meets serving.min_parity ({floor_text(floor)})")


# kept parity is a CPU measurement: its provider labels, back to the backends that ran them
PROVIDER_BACKEND = {b.label("cpu"): b.name for b in BACKENDS.values() if b.runs_on("cpu")}


def kept_evidence(root: Path, release_id: str | None, files: dict[str, str], listing: Mapping[str, Any]) -> Evidence:
    """The artifact's kept parity and bench reports as :class:`Evidence`: this release's parity
    (`readout_sdk.release.evidence.kept_parity`) measured on this kind of machine, per (target, backend) whose every
    check passed, with bench speeds from this kind of machine; empty when there are none."""
    from readout_sdk.release.evidence import kept_parity, read_kept

    here = machine_id()
    kept, _ = kept_parity(root, release_id, files, listing)
    if kept is None or kept.machine != here:
        return Evidence({}, {})
    passed = {(target, PROVIDER_BACKEND[provider]): cell.measured for (target, provider), cell in kept.cells.items()
              if provider in PROVIDER_BACKEND and cell.decisions == {"PASS"}}
    speed: dict[tuple[str, str], float] = {}
    bench = read_kept(root, "bench", listing) or {}
    if bench.get("machine") == here and isinstance(bench.get("rows"), list):
        for row in bench["rows"]:
            key = ((row["target"], row["backend"]) if isinstance(row, dict) and isinstance(row.get("target"), str)
                   and isinstance(row.get("backend"), str) else None)  # a row of another shape counts for nothing
            if key in passed and isinstance(row.get("items_per_s"), (int, float)) and row["items_per_s"] > 0:
                speed[key] = max(speed.get(key, 0.0), float(row["items_per_s"]))
    return Evidence(passed, speed)
