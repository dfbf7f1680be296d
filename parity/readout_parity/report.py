"""Parity reports: a terminal table, JSON, JUnit XML, and the copy the artifact keeps."""
from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from readout_parity.harness import Report
from readout_sdk.agreement import metric_text
from readout_sdk.release.lifecycle import keep


def to_json(report: Report) -> dict[str, Any]:
    doc = asdict(report)
    doc["summary"] = report.counts()
    return doc


# informative runners the reference may bring (never targets, never gated), and what a reader should make of them
DEFAULT_POSITIONS = "eager-default-position-ids"
INFORMATIVE = {DEFAULT_POSITIONS: "eager PyTorch with transformers' default position ids on left-padded batches, "
                                  "not a target: it shows what left padding does to a model exported without the "
                                  "ABI's position ids; the exported graph is not affected"}


def _corpus_notes(c: dict[str, Any]) -> list[str]:
    """What the corpus line leaves out: roles measured as one input, items dropped as repeats."""
    notes = []
    for names in c.get("input_policies") or []:
        if len(names) > 1:
            notes.append(f"roles {', '.join(names)}: the same input policy (prompt and rows), "
                         "measured once")
    if c.get("duplicates_dropped"):
        notes.append(f"{c['duplicates_dropped']} repeated item(s) dropped: each distinct item is measured once")
    return notes


def table(report: Report) -> str:
    """A readable table: one line per check; cells this machine cannot run, once, below it; the ungated
    measurements; diagnostics that are not of any target, apart; the summary line last (what ``-q`` prints)."""
    c = report.corpus
    lines = [f"parity of {report.artifact} ({report.family}); reference: {c.get('reference', '?')}",
             f"corpus: {c['source']}, {c['items']} items, {c['min_tokens']}..{c['max_tokens']} tokens "
             f"(max_length {c['max_length']}); padding {'/'.join(report.grid['padding_sides'])}; "
             f"batch widths {report.grid['batch_widths']}"] + _corpus_notes(c) + [""]
    rows = [k for k in report.checks if not k.absent]
    t = max(19, *(len(k.target) for k in rows)) if rows else 19
    w = max(20, *(len(k.label) for k in rows)) if rows else 20
    r = max(12, *(len(k.requirement) for k in rows)) if rows else 12
    head = f"{'target':<{t}} {'provider':<22} {'metric':<{w}} {'requirement':<{r}} {'measured':>12}  decision"
    lines += [head, "-" * len(head)]
    for k in rows:
        measured = metric_text(k.metric, k.measured)
        note = f"  ({k.reason})" if k.reason else ""
        lines.append(f"{k.target:<{t}} {k.provider:<22} {k.label:<{w}} {k.requirement:<{r}} {measured:>12}  "
                     f"{k.decision}{note}")
    lines += _absent_lines(report)
    gated_targets = [m for m in report.measurements if m["target"] not in INFORMATIVE]
    if gated_targets:
        lines += ["", "measured, not gated (diagnostics: these metrics have no budget at the target's precision, so",
                  "they neither pass nor fail it; raw output differences are expected at reduced precision, where the",
                  "decision and similarity metrics above are what is gated, and max_rel_error divides by the reference",
                  "value, so it is large wherever a reference output is near zero):"]
        lines += _measurement_lines(gated_targets)
    lines += _informative_lines(report)
    n = report.counts()
    absent = sum(1 for k in report.checks if k.absent)
    lines += ["", f"{n['PASS']} passed, {n['FAIL']} failed, {n['NOT_EVALUATED']} not evaluated "
                  f"(NOT_EVALUATED never counts as a pass"
                  + (f"; {absent} of them cannot run on this machine, listed once above" if absent else "")
                  + f"); the grid took {report.seconds:.1f}s (after loading; the reference included)"]
    return "\n".join(lines)


def _absent_lines(report: Report) -> list[str]:
    """Cells this machine cannot run (no CUDA device, a runtime not installed): once per provider and reason,
    naming the targets, instead of one NOT_EVALUATED row per target."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for k in report.checks:
        if k.absent:
            grouped.setdefault((k.provider, k.reason), []).append(k.target)
    if not grouped:
        return []
    lines = ["", "not on this machine (NOT_EVALUATED, never a pass; run parity where they exist):"]
    for (provider, reason), targets in grouped.items():
        lines.append(f"  {provider}: {reason} ({', '.join(targets)})")
    return lines


def _measurement_lines(measurements: list[dict[str, Any]]) -> list[str]:
    named = [f"{m['output']}:{m['metric']}" if m.get("output") else m["metric"] for m in measurements]
    width = max(18, *(len(n) for n in named))
    return [f"  {m['target']:<27} {m['provider']:<22} {name:<{width}} "
            f"{metric_text(m['metric'], m['measured']):>12}  (worst case: {m['worst_case']})"
            for m, name in zip(measurements, named)]


def _informative_lines(report: Report) -> list[str]:
    """Runs of something other than a target (e.g. transformers' default position ids), apart from every result."""
    lines = []
    for name, why in INFORMATIVE.items():
        mine = [m for m in report.measurements if m["target"] == name]
        if mine:
            lines += ["", f"diagnostic, not a result ({name}: {why}):"] + _measurement_lines(mine)
    return lines


def junit(report: Report) -> str:
    """JUnit XML: one test case per check; FAIL is a failure, NOT_EVALUATED is skipped with its reason."""
    n = report.counts()
    suite = ET.Element("testsuite", name=f"readout-parity {Path(report.artifact).name}", tests=str(len(report.checks)),
                       failures=str(n["FAIL"]), skipped=str(n["NOT_EVALUATED"]), time=f"{report.seconds:.2f}")
    for k in report.checks:
        case = ET.SubElement(suite, "testcase", classname=f"{k.target}.{k.provider}", name=k.label)
        text = f"measured {k.measured} (requirement {k.requirement}; {k.reference}; {k.reason})"
        if k.decision == "FAIL":
            ET.SubElement(case, "failure", message=text)
        elif k.decision == "NOT_EVALUATED":
            ET.SubElement(case, "skipped", message=k.reason)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"


def keep_in_artifact(report: Report, only: list[str] | None = None) -> None:
    """The artifact keeps its last report (parity.json) and a summary in readout.json (`lifecycle.keep`:
    together or not at all). With ``only`` (a run limited to some targets, e.g. after `compile`), the
    listed report's checks of other targets stay, so earlier decisions are not lost; a report readout.json
    does not list, or of another shape, contributes nothing."""
    def merge(old: dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
        if only is not None and old is not None and old.get("machine") == report.machine \
                and old.get("release_id") == report.release_id:  # evidence of another release is not kept
            fresh = set(only) | {c.target for c in report.checks}
            kept = [c for c in map(_check, old.get("checks") or []) if c is not None and c.target not in fresh]
            report.checks = kept + report.checks
            if report.reconciliation is None and kept:
                report.reconciliation = old.get("reconciliation")
            files = old.get("target_files") if isinstance(old.get("target_files"), dict) else {}
            report.target_files = {**{c.target: files[c.target] for c in kept if c.target in files},
                                   **report.target_files}
        n = report.counts()
        return to_json(report), {"summary": f"{n['PASS']} passed, {n['FAIL']} failed, {n['NOT_EVALUATED']} not "
                                            f"evaluated (see parity.json)", **n}

    keep(Path(report.artifact), "parity", merge)  # listed with its sha256 and the state this evidence supports


def _check(item: Any) -> Any:
    """A kept check as a :class:`Check`, or None for an entry of another shape."""
    from readout_parity.checks import Check

    try:
        return Check(**item) if isinstance(item, dict) else None
    except TypeError:
        return None
