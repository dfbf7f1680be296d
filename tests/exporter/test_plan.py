"""The resolved plan (issue 46 point 4): frozen once resolved, the family looked up once, and planning
importing nothing of the graph (the graph is made from a plan, never the other way round)."""
from __future__ import annotations

import ast
import json
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest

from readout_sdk import families
from readout_export.planning.manifest import load_manifest
from readout_export.planning.resolve import resolve

from helpers.synthetic import make_model

PLANNING = Path(__file__).resolve().parents[2] / "exporter" / "readout_export" / "planning"


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    root = tmp_path_factory.mktemp("plan")
    model = make_model("bert", "sequence_classification", root / "model", labels=["no", "yes"])
    manifest = root / "manifest.json"
    manifest.write_text(json.dumps({"schema": "readout-export/manifest/1", "family": "sequence_classification",
                                    "model": str(model), "output_dir": str(root / "out"), "max_length": 64,
                                    "targets": [{"format": "onnx", "precision": "fp32"}]}))
    return resolve(load_manifest(manifest))


def test_a_resolved_plan_is_read_only(plan):
    # what was checked is what the build reads: no later step can change a resolved value
    for name, value in (("max_length", 512), ("labels", ["a", "b"]), ("family", "embedding"), ("targets", [])):
        with pytest.raises(FrozenInstanceError, match=f"Plan.{name}"):
            setattr(plan, name, value)
    assert plan.max_length == 64 and plan.labels == ["no", "yes"]


def test_the_family_is_looked_up_once_and_is_the_registry_s(plan):
    assert plan.spec is families.get("sequence_classification")
    assert plan.spec.name == plan.family


def test_planning_imports_nothing_of_the_graph():
    # lazy imports count: a function-level import is still a dependency of the module
    wrong = []
    for path in sorted(PLANNING.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else \
                [a.name for a in node.names] if isinstance(node, ast.Import) else []
            wrong += [f"{path.name}: {n}" for n in names if n.startswith("readout_export.graph")]
    assert wrong == []
