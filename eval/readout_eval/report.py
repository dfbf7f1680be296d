"""Evaluation reports for people (a terminal table) and CI (JUnit XML: one test case per gate)."""
from __future__ import annotations

from typing import Any
from xml.etree import ElementTree as ET


def _fmt(v: Any) -> str:
    if v is None:
        return "NOT_EVALUATED"
    if isinstance(v, float):
        return f"{v:.4f}" if abs(v) < 1e4 else f"{v:.4g}"
    return str(v)


def table(doc: dict[str, Any]) -> str:
    """A readable summary: data and role, metrics with support, detail, slices, paired deltas, gates."""
    d = doc["data"]
    lines = [f"evaluation of {doc['artifact']} ({doc['family']}, release {str(doc['release_id'])[:12]}, "
             f"{doc['target']} on {doc['backend']})",
             f"data: {d['file']} sha256 {d['sha256'][:12]}, {d['rows']} rows, role {doc['role']}", ""]
    paired = doc.get("paired") or {}
    deltas = paired.get("deltas") or {}
    head = f"{'metric':<24} {'value':>14} {'support':>8}" + (f" {'parent':>14} {'delta':>10}" if paired else "")
    lines += [head, "-" * len(head)]
    for k, v in doc["metrics"].items():
        row = f"{k:<24} {_fmt(v):>14} {doc['support'].get(k, ''):>8}"
        if paired:
            dv = deltas.get(k)
            row += f" {_fmt(paired['parent_metrics'].get(k)):>14} {('%+.4f' % dv) if dv is not None else '-':>10}"
        lines.append(row)
    for section in ("per_class", "per_label", "per_type", "per_output"):
        if doc.get(section):
            lines += ["", section.replace("_", " ") + ":"]
            for name, vals in doc[section].items():
                lines.append(f"  {name:<22} " + "  ".join(f"{k} {_fmt(v)}" for k, v in vals.items()))
    if doc.get("slices"):
        lines += ["", f"slices (gated at support >= {doc['min_support']}):"]
        main = next(iter(doc["metrics"]))
        for s in doc["slices"]:
            lines.append(f"  {s['name']:<22} support {s['support']:>5}  {main} {_fmt(s['metrics'].get(main))}"
                         + ("" if s["gated"] else "  (shown, not gated)"))
    if paired.get("transitions"):
        t = paired["transitions"]
        lines += ["", f"paired with parent {str(paired['parent_release_id'])[:12]} on {paired['cases']} cases "
                      f"(correct: {paired['correct_means']}):",
                  f"  both correct {t['both_correct']}, parent correct -> candidate wrong "
                  f"{t['parent_correct_candidate_wrong']}, parent wrong -> candidate correct "
                  f"{t['parent_wrong_candidate_correct']}, both wrong {t['both_wrong']}"]
        if paired["regressed_ids"]:
            lines.append(f"  regressed: {', '.join(paired['regressed_ids'])}")
    if doc["gates"]:
        lines += ["", "gates:"]
        for g in doc["gates"]:
            lines.append(f"  {g['gate']:<34} measured {_fmt(g['measured']):>10}  {g['decision']}"
                         + (f"  ({g['reason']})" if g["reason"] else ""))
    for f in doc.get("flags", []):
        lines.append(f"note: {f}")
    lines += ["", f"verdict {doc['verdict']} (exit {doc['exit_code']})"]
    return "\n".join(lines)


def junit(doc: dict[str, Any]) -> str:
    """JUnit XML: one test case per gate; FAIL is a failure, NOT_EVALUATED an error (never a pass)."""
    gates = doc["gates"]
    fails = sum(g["decision"] == "FAIL" for g in gates)
    unknown = sum(g["decision"] == "NOT_EVALUATED" for g in gates)
    suite = ET.Element("testsuite", name=f"readout-evaluate {doc['role']} {doc['data']['file']}",
                       tests=str(len(gates)), failures=str(fails), errors=str(unknown))
    for g in gates:
        case = ET.SubElement(suite, "testcase", classname=f"evaluate.{doc['role']}", name=g["gate"])
        text = f"measured {g['measured']} (requirement {g['requirement']}, support {g['support']}) {g['reason']}"
        if g["decision"] == "FAIL":
            ET.SubElement(case, "failure", message=text)
        elif g["decision"] == "NOT_EVALUATED":
            ET.SubElement(case, "error", message=f"NOT_EVALUATED: {g['reason']}")
    if not gates and doc["exit_code"] != 0:  # a test run with nothing gated is not a pass either
        case = ET.SubElement(suite, "testcase", classname=f"evaluate.{doc['role']}", name="gates")
        ET.SubElement(case, "error", message="no gates declared")
        suite.set("tests", "1")
        suite.set("errors", "1")
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suite, encoding="unicode") + "\n"
