"""The parity table a reviewer reads at a glance (issue 48 point 7): cells this machine cannot run are named
once, below the table, not as one NOT_EVALUATED row per target; a run of something that is not a target sits
apart from every result; the summary line stays last (what ``-q`` prints) and still counts every
NOT_EVALUATED (JSON, JUnit and --strict are unchanged)."""
from __future__ import annotations

import xml.etree.ElementTree as ET

from readout_parity.checks import Check, not_evaluated
from readout_parity.harness import Report
from readout_parity.report import junit, table, to_json

CORPUS = {"source": "built-in", "items": 31, "parts": 31, "min_tokens": 3, "max_tokens": 128, "max_length": 128,
          "reference": "eager PyTorch"}
GRID = {"targets": ["onnx-fp32", "onnx-int8"], "providers": ["CPUExecutionProvider"], "padding_sides": ["left", "right"],
        "batch_widths": [1, 7]}


def _report() -> Report:
    checks = [Check("onnx-fp32", "CPUExecutionProvider", "min_cosine", ">= 0.9999", 1.0, "PASS", "eager", "right, 7"),
              Check("onnx-int8", "CPUExecutionProvider", "min_cosine", ">= 0.97", 0.99, "PASS", "eager", "left, 7"),
              not_evaluated("onnx-fp32", "CUDAExecutionProvider", "no CUDA device", absent=True),
              not_evaluated("onnx-int8", "CUDAExecutionProvider", "no CUDA device", absent=True),
              not_evaluated("onnx-int8", "CPUExecutionProvider", "no metric of embedding has a budget at int8")]
    measurements = [{"target": "onnx-int8", "provider": "CPUExecutionProvider", "metric": "max_abs_error",
                     "measured": 0.01, "worst_case": "left padding, batch 7", "gated": False},
                    {"target": "eager-default-position-ids", "provider": "torch", "metric": "min_cosine",
                     "measured": 0.597, "worst_case": "left padding, batch 7", "gated": False}]
    return Report("art", "embedding", CORPUS, GRID, checks, measurements, seconds=4.2)


def test_cells_that_cannot_exist_here_are_named_once_below_the_table():
    lines = table(_report()).splitlines()
    rows = [line for line in lines if line.startswith("onnx-")]
    assert len(rows) == 3 and not any("CUDAExecutionProvider" in line for line in rows)
    footnote = [line for line in lines if "CUDAExecutionProvider" in line]
    assert footnote == ["  CUDAExecutionProvider: no CUDA device (onnx-fp32, onnx-int8)"]
    # a NOT_EVALUATED that is not about this machine stays a row: it says something about the artifact
    assert any("no metric of embedding has a budget" in line for line in rows)


def test_the_summary_counts_every_not_evaluated_and_says_which_cannot_run_here():
    last = table(_report()).splitlines()[-1]
    assert last.startswith("2 passed, 0 failed, 3 not evaluated (NOT_EVALUATED never counts as a pass; 2 of them "
                           "cannot run on this machine"), last
    assert "4.2s" in last and "after loading" in last  # what the time counts
    assert _report().exit_code(strict=True) == 1 and _report().exit_code() == 0


def test_a_diagnostic_run_sits_apart_from_every_result():
    text = table(_report())
    diagnostic = text.index("diagnostic, not a result (eager-default-position-ids")
    assert text.index("eager-default-position-ids  ") > diagnostic  # its value is printed under that heading only
    assert text.count("eager-default-position-ids") == 2
    ungated = text.index("measured, not gated")
    assert ungated < diagnostic and "onnx-int8" in text[ungated:diagnostic]


def test_json_and_junit_still_carry_every_cell():
    report = _report()
    doc = to_json(report)
    assert doc["summary"] == {"PASS": 2, "FAIL": 0, "NOT_EVALUATED": 3}
    assert sum(1 for c in doc["checks"] if c["absent"]) == 2
    suite = ET.fromstring(junit(report).split("\n", 1)[1])
    assert len(suite.findall("testcase/skipped")) == 3
