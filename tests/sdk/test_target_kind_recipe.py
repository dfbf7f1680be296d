"""docs/architecture.md, "Adding a target kind", followed: one `TargetKind` added to ``KINDS`` (step 1; here in the
test, the fp16 graph prepared for OpenVINO, a kind this release does not declare) must reach every place the recipe
says a kind is read without any other change: the artifact's file name, `load`'s choice of backend, parity's cells,
the exporter's recipe (step 2: its ``produce`` is an existing recipe), the schema enums (step 3: its words are
already there) and its budget key. A recipe gone stale fails here."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from readout_sdk.backend import choose
from readout_sdk.targets import Target, kinds
from readout_sdk.targets.backends import BACKENDS
from readout_sdk.targets.open import ways_to_run

ROOT = Path(__file__).resolve().parents[2]
NEW = kinds.TargetKind("onnx", "fp16", "openvino", ("openvino",), "fp16", default=False, budget="fp16",
                       arithmetic="fp16", description="recipe test: the fp16 graph prepared for OpenVINO")


@pytest.fixture
def added(monkeypatch):
    """Step 1, as kinds.py's own tables would hold it (KINDS by name, BY_KEY by triple), then gone."""
    assert NEW.name not in kinds.KINDS  # a kind the release does not declare, so nothing below was there before
    monkeypatch.setitem(kinds.KINDS, NEW.name, NEW)
    monkeypatch.setitem(kinds.BY_KEY, NEW.key, NEW)
    return NEW


def test_a_new_kind_names_its_file_and_is_found_by_its_triple(added):
    target = Target.of(added.name)
    assert added.name == "onnx-fp16-openvino" and target.kind is added
    assert target.file == "model.onnx-fp16-openvino.onnx"
    assert kinds.kind_of("onnx", "fp16") is not added  # the default fp16 runtime is unchanged
    assert Target.from_manifest({"format": "onnx", "precision": "fp16", "runtime": "openvino"}).kind is added


def test_load_picks_its_backend_and_parity_lists_its_cells(added, tmp_path):
    target = Target.of(added.name)
    picked = choose([target], "fp16", "cpu")
    assert picked.target is target and picked.backend == "openvino"
    cells = [label for label, _ in ways_to_run(tmp_path, target)]
    assert cells == [BACKENDS["openvino"].label(d) for d in BACKENDS["openvino"].devices]


def test_its_recipe_schema_words_and_budget_exist(added):
    from readout_export.targets import RECIPES

    assert added.produce in RECIPES  # step 2: no new recipe is needed for a graph produced an existing way
    manifest = json.loads((ROOT / "abi_specs" / "manifest-1.schema.json").read_text())
    entry = manifest["properties"]["targets"]["items"]["properties"]
    for key, word in (("format", added.format), ("precision", added.precision), ("runtime", added.runtime)):
        assert word in entry[key]["enum"]  # step 3: its words are enum values already
    assert added.budget in json.loads((ROOT / "abi_specs" / "parity-budgets-1.json").read_text())
