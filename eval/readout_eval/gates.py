"""Gates: ``METRIC[SLICE] OP BOUND`` with OP ``>=`` or ``<=`` and BOUND a number, ``parent``, or
``parent-D`` / ``parent+D`` (non-regression against the parent on the same cases).

Examples: ``accuracy>=0.85``, ``ece<=0.05``, ``macro_f1[tokens:129-512]>=0.7``, ``accuracy>=parent-0.01``.
A gate whose metric, slice or parent was not measured, or whose slice is under the minimum support, is
NOT_EVALUATED: never a pass.
"""
from __future__ import annotations

import difflib
import math
import re
from dataclasses import asdict, dataclass
from typing import Any, Mapping

from readout_sdk.errors import SdkError

PASS, FAIL, NOT_EVALUATED = "PASS", "FAIL", "NOT_EVALUATED"
_GATE = re.compile(r"^\s*(?P<metric>[A-Za-z0-9_@.]+)(\[(?P<slice>[^\]]+)\])?\s*(?P<op>>=|<=)\s*"
                   r"(?P<bound>parent\s*([+-]\s*[0-9.eE+-]+)?|[-+]?[0-9.eE+-]+)\s*$")


class GateError(SdkError, ValueError):
    """A gate that cannot be parsed: names it and the expected form."""


@dataclass(frozen=True)
class Gate:
    text: str
    metric: str
    slice: str | None
    op: str
    value: float | None       # a fixed bound
    parent_offset: float | None  # bound = parent's value + offset

    @classmethod
    def parse(cls, text: str, where: str = "--gate", known: tuple[str, ...] | None = None) -> "Gate":
        """Read one gate; with ``known`` (the task's metric names) refuse a metric it never reports."""
        if not isinstance(text, str):
            raise GateError(f"{where}: expected a gate string, got {type(text).__name__}")
        m = _GATE.match(text)
        if not m:
            raise GateError(f"{where}: cannot read gate {text!r}; expected METRIC[SLICE]>=BOUND or <=BOUND, "
                            "BOUND a number or parent[+-D] (e.g. accuracy>=0.9, ece<=parent+0.01)")
        if known is not None and m["metric"] not in known:
            close = difflib.get_close_matches(m["metric"], known, 1)
            raise GateError(f"{where}: gate {text!r} names {m['metric']!r}, which this task does not measure"
                            + (f" (did you mean {close[0]!r}?)" if close else "") + f"; it measures {', '.join(known)}")
        bound = m["bound"].replace(" ", "")
        try:
            number = float(bound[6:] or 0) if bound.startswith("parent") else float(bound)
        except ValueError:
            raise GateError(f"{where}: gate {text!r} has a bound that is not a number") from None
        if not math.isfinite(number):
            raise GateError(f"{where}: gate {text!r} has a bound that is not a finite number")
        if bound.startswith("parent"):
            return cls(text.strip(), m["metric"], m["slice"], m["op"], None, number)
        return cls(text.strip(), m["metric"], m["slice"], m["op"], number, None)


@dataclass
class GateResult:
    gate: str
    metric: str
    slice: str | None
    requirement: str
    measured: float | None
    bound: float | None
    support: int | None
    decision: str
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def decide(gate: Gate, metrics: Mapping[str, Any], support: Mapping[str, int],
           slices: Mapping[str, Any], parent: Mapping[str, Any] | None, min_support: int) -> GateResult:
    """One gate against the measured metrics (``slices``: name -> `Slice`; ``parent``: its metrics,
    whole or of the same slice)."""
    req = f"{gate.op} " + (f"{gate.value:g}" if gate.value is not None else
                           f"parent{gate.parent_offset:+g}" if gate.parent_offset else "parent")

    def result(measured, bound, n, decision, reason=""):
        return GateResult(gate.text, gate.metric, gate.slice, req, measured, bound, n, decision, reason)

    if gate.slice is not None:
        s = slices.get(gate.slice)
        if s is None:
            return result(None, None, 0, NOT_EVALUATED, f"no case is in slice {gate.slice!r}")
        if not s.gated:
            return result(s.measured.metrics.get(gate.metric), None, s.support, NOT_EVALUATED,
                          f"slice {gate.slice!r} has {s.support} cases, under the minimum support {min_support}")
        metrics, support = s.measured.metrics, s.measured.support
    if gate.metric not in metrics:
        return result(None, None, None, NOT_EVALUATED, f"{gate.metric} is not measured for this task "
                                                       f"(measured: {', '.join(sorted(metrics))})")
    value, n = metrics[gate.metric], support.get(gate.metric)
    if value is None:
        return result(None, None, n, NOT_EVALUATED, f"{gate.metric} could not be measured on these cases")
    if gate.value is not None:
        bound = gate.value
    else:
        base = None if parent is None else parent.get(gate.metric)
        if base is None:
            return result(value, None, n, NOT_EVALUATED, "no parent measurement (run with --parent)")
        bound = base + (gate.parent_offset or 0.0)
    ok = value >= bound if gate.op == ">=" else value <= bound
    return result(value, bound, n, PASS if ok else FAIL)


def verdict(results: list[GateResult]) -> str:
    """PASS only when there are gates and every one passed; FAIL if any failed; else NOT_EVALUATED."""
    if any(r.decision == FAIL for r in results):
        return FAIL
    if results and all(r.decision == PASS for r in results):
        return PASS
    return NOT_EVALUATED
