"""Gate vocabulary: every check is (requirement, measured value, decision).

`NOT_EVALUATED` carries its reason and never counts as `PASS`.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any

from readout_sdk.errors import SdkError

PASS, FAIL, NOT_EVALUATED = "PASS", "FAIL", "NOT_EVALUATED"


class ParityError(SdkError, RuntimeError):
    """The reference cannot be built (missing source, changed weights) or the corpus is unusable; an
    `SdkError`, so the CLI reports it as a refusal (one line, exit 2) like the SDK's own."""


@dataclass(frozen=True)
class Check:
    """One gated measurement of one target on one execution provider."""

    target: str          # e.g. "onnx-int8"
    provider: str        # e.g. "CPUExecutionProvider"
    metric: str          # e.g. "min_cosine"
    requirement: str     # e.g. ">= 0.97"
    measured: float | None
    decision: str        # PASS, FAIL or NOT_EVALUATED
    reference: str       # what the value was measured against
    reason: str = ""     # why NOT_EVALUATED, or where the worst case was
    output: str = ""     # the readout measured, in a multi-output artifact (`readout_sdk.families.multi_output`)
    # NOT_EVALUATED because the cell cannot exist on this machine (its device or runtime is not here): still
    # NOT_EVALUATED everywhere (JSON, JUnit, --strict); the table names such cells once, below it
    absent: bool = False

    @property
    def label(self) -> str:
        """The metric as a report names it: ``sparse:term_overlap`` for one output of several."""
        return f"{self.output}:{self.metric}" if self.output else self.metric

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def default_budgets() -> dict[str, Any]:
    """The ABI's default budgets per precision (abi_specs/parity-budgets-1.json)."""
    text = resources.files("readout_sdk.specs").joinpath("parity-budgets-1.json").read_text(encoding="utf-8")
    return {k: v for k, v in json.loads(text).items() if k != "description"}


def budgets_for(precision: str, overrides: dict[str, Any] | None, family: Any = None) -> dict[str, dict[str, float]]:
    """Default budgets for a precision with the manifest's `parity` overrides applied. A family's own budgets
    (`Family.budgets`: a plugin's metrics) fill in metrics the ABI's file does not name; never replace them."""
    merged = dict((getattr(family, "budgets", None) or {}).get(precision, {}))
    merged.update(default_budgets().get(precision, {}))
    merged.update((overrides or {}).get(precision, {}))
    return merged


def target_budgets(target: Any, overrides: dict[str, Any] | None, family: Any = None) -> dict[str, dict[str, float]]:
    """What a target is gated on: a budgeted target (precision auto) on the budget it was built to keep
    (names ending in 'error' are maxima, the rest minima); any other on the budgets its kind names
    (`readout_sdk.targets.TargetKind.budget`, a key of parity-budgets-1.json and of the manifest's overrides)."""
    declared = (getattr(target, "recipe", None) or {}).get("budget")
    if declared:
        return {m: ({"max": v} if m.endswith("error") else {"min": v}) for m, v in declared.items()}
    return budgets_for(target.kind.budget or target.precision, overrides, family)


def decide(target: str, provider: str, metric: str, measured: float, bound: dict[str, float], reference: str,
           where: str = "") -> Check:
    """Compare a measured value with its bound ({"max": x} or {"min": x})."""
    if "max" in bound:
        ok, req = measured <= bound["max"], f"<= {bound['max']:g}"
    else:
        ok, req = measured >= bound["min"], f">= {bound['min']:g}"
    return Check(target, provider, metric, req, float(measured), PASS if ok else FAIL, reference, where)


def not_evaluated(target: str, provider: str, reason: str, absent: bool = False) -> Check:
    """A cell measured by nothing, and why (``absent``: its device or runtime is not on this machine)."""
    return Check(target, provider, "all", "-", None, NOT_EVALUATED, "-", reason, absent=absent)
