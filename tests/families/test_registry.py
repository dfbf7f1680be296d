"""The family registry is the one definition: schemas agree with it, every family is gated at every
precision, nothing outside the family modules names a family, and the packages import one way."""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from readout_sdk.families import REGISTRY, Family, get

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "abi_specs"
PACKAGES = {"readout_sdk": ROOT / "sdk" / "readout_sdk", "readout_parity": ROOT / "parity" / "readout_parity",
            "readout_export": ROOT / "exporter" / "readout_export", "readout_eval": ROOT / "eval" / "readout_eval"}


def _schema(name: str) -> dict:
    return json.loads((SPECS / name).read_text())


def test_schema_family_enums_are_the_registry():
    manifest = _schema("manifest-1.schema.json")
    abi = _schema("readout-abi-1.schema.json")
    assert manifest["properties"]["family"]["enum"] == list(REGISTRY)
    builtin, plugin = abi["properties"]["family"]["anyOf"]
    assert builtin["enum"] == list(REGISTRY) and "pattern" in plugin  # plugin families: any name, $.plugin stated
    # the conditions that tell a built-in from a plugin family name the same families
    for rule in abi["allOf"]:
        family = rule["if"]["properties"]["family"]
        assert family.get("enum", family.get("not", {}).get("enum")) == list(REGISTRY)
    scores = abi["allOf"][1]["then"]["properties"]["output"]["properties"]["score_type"]["enum"]
    assert set(scores) == {t for f in REGISTRY.values() for t in f.score_types}


def test_schema_aggregations_are_the_families():
    declared = {a for f in REGISTRY.values() for a in f.aggregations}
    abi = _schema("readout-abi-1.schema.json")["properties"]["input"]["properties"]["long_inputs"]
    assert set(abi["properties"]["aggregation"]["enum"]) == declared
    # a manifest may declare the aggregation of every family whose manifest takes long_inputs
    stated = {a for f in REGISTRY.values() if "long_inputs" in f.manifest_fields for a in f.aggregations}
    manifest = _schema("manifest-1.schema.json")["properties"]["long_inputs"]
    assert set(manifest["properties"]["aggregation"]["enum"]) == stated


@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16", "fp16", "int8"])
@pytest.mark.parametrize("family", list(REGISTRY))
def test_every_family_has_a_gated_metric_at_every_precision(family, precision):
    budgets = json.loads((SPECS / "parity-budgets-1.json").read_text())
    assert precision in budgets
    fam = get(family)
    measured = set(fam.metric_names) | set(fam.raw_metric_names)
    gated = measured & set(budgets[precision])
    # at least one decision-level (or value-level) metric, not only raw errors
    assert gated - set(fam.raw_metric_names), f"{family} has nothing but raw errors gated at {precision}"


def test_every_budgeted_metric_is_measured_by_some_family():
    budgets = json.loads((SPECS / "parity-budgets-1.json").read_text())
    known = {m for f in REGISTRY.values() for m in (*f.metric_names, *f.raw_metric_names)}
    for precision, metrics in budgets.items():
        if precision != "description":
            assert set(metrics) <= known, f"{precision}: {set(metrics) - known} is measured by no family"


def test_each_family_lives_in_its_own_module():
    for name, fam in REGISTRY.items():
        assert type(fam).__module__ == f"readout_sdk.families.{name}"
        assert fam.calls and all(callable(getattr(__import__("readout_sdk").Engine, c)) for c in fam.calls)


def test_every_family_is_evaluated_by_a_task_and_can_fit_what_it_lists():
    """Evaluation and calibration read the family's output object and calibrators, never its name."""
    from readout_eval.tasks import TASKS

    for fam in REGISTRY.values():
        assert fam.task in TASKS, fam
        assert set(fam.calibrators) <= {"temperature", "abstention", "thresholds", "null_threshold"}, fam
        if {"temperature", "abstention"} & set(fam.calibrators):
            assert hasattr(fam, "class_probabilities") and "softmax" in fam.score_types, fam
        if fam.task == "relevance":
            assert type(fam).relevance is not Family.relevance, fam  # each scores documents its own way


FAMILY_STRING = re.compile(r'"(%s)"' % "|".join(REGISTRY))
WIRE_NAME = "# wire name, not a family"


def test_no_family_is_named_outside_the_family_modules():
    """The review's grep: a family's name as a string only in its module (and the exporter's hooks)."""
    spread = []
    for package, root in PACKAGES.items():
        for path in root.rglob("*.py"):
            rel = path.relative_to(ROOT)
            if "famil" in str(rel):
                continue
            # a line naming another API's field that happens to equal a family name (OpenAI's object type
            # "embedding") says so at its end, and only that line is exempt
            text = "\n".join(line for line in path.read_text(encoding="utf-8").splitlines()
                             if not line.rstrip().endswith(WIRE_NAME))
            if FAMILY_STRING.search(text):
                spread.append(str(rel))
    assert spread == [], spread


def _imports(path: Path, module: str) -> set[str]:
    """Every readout_* module ``path`` imports, at any depth of the file (lazy imports count)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names]  # a submodule, or a name of node.module
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out |= {n for n in names if n.startswith("readout_")}
    return out


def _graph() -> dict[str, set[str]]:
    modules = {}
    for package, root in PACKAGES.items():
        for path in root.rglob("*.py"):
            rel = path.relative_to(root).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            modules[".".join([package, *parts])] = path
    graph = {}
    for name, path in modules.items():
        deps = set()
        for imp in _imports(path, name):
            while imp and imp not in modules:  # `from a.b import c` names module a.b (or a.b.c)
                imp = imp.rpartition(".")[0]
            if imp and imp != name:
                deps.add(imp)
        graph[name] = deps
    return graph


def test_packages_import_one_way():
    allowed = {"readout_sdk": {"readout_sdk"}, "readout_parity": {"readout_sdk", "readout_parity"},
               "readout_eval": {"readout_sdk", "readout_eval"},
               "readout_export": {"readout_sdk", "readout_parity", "readout_eval", "readout_export"}}
    for module, deps in _graph().items():
        package = module.split(".")[0]
        wrong = {d for d in deps if d.split(".")[0] not in allowed[package]}
        assert not wrong, f"{module} imports {wrong}"


def test_no_import_cycles():
    graph = _graph()
    # a package's __init__ re-exporting its modules is not a cycle of design; leave those edges out
    edges = {m: {d for d in deps if not (graph.get(d) is not None and d == m.rpartition(".")[0])}
             for m, deps in graph.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for d in edges.get(m, ()):
            if state.get(d) == 1:
                raise AssertionError(f"import cycle: {' -> '.join(stack[stack.index(d):] + [d])}")
            if state.get(d) is None:
                visit(d)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if state.get(m) is None:
            visit(m)
