"""`readout_sdk.release.identity` on one record, without rebuilding anything: each semantic layer's fields
edited alone change that layer's digest and every descendant's, never an ancestor's (the chain the spec
draws: tokenizer -> contextual -> readout -> head -> calibration -> decision); an edit the digests do not
follow is refused; cache keys follow the layers they depend on. The record is the session's shared
classifier's (tests/helpers/sdk_fixtures.py); tests/release/test_identity.py checks whole rebuilds."""
from __future__ import annotations

import copy
import json
from typing import Any, Callable

import pytest

from readout_sdk.release.identity import LAYERS, Identity, IdentityError, cache_key, compute, digest

Edit = Callable[[dict, dict], None]  # (record, weights) -> None, in place


def _set(*path: str, value: Any) -> Edit:
    def edit(record: dict, weights: dict) -> None:
        node = record
        for key in path[:-1]:
            node = node.setdefault(key, {})
        node[path[-1]] = value
    return edit


def _weight(name: str, value: Any) -> Edit:
    def edit(record: dict, weights: dict) -> None:
        weights[name] = value
    return edit


# one edit per layer, each reaching only that layer's own fields (what the spec lists for it)
EDITS: dict[str, Edit] = {
    "tokenizer": _set("provenance", "tokenizer_sha256", value="0" * 64),
    "contextual": _weight("backbone", "1" * 64),
    "readout": _weight("projection", ["2" * 64]),
    "head": _set("output", "score_type", value="sigmoid"),
    "calibration": _set("calibration", value={"method": "temperature", "temperature": 1.5}),
    "decision": _set("output", "abstain_below", value=0.4),
}


@pytest.fixture(scope="module")
def record(shared) -> dict:
    meta = json.loads((shared("classify")[1] / "readout.json").read_text())
    return meta["abi"]


def _recomputed(record: dict, edit: Edit) -> dict:
    """The identity section ``record`` would have after ``edit``."""
    return _edited_and_recomputed(record, edit)["identity"]


def test_the_built_identity_is_the_one_its_fields_give(record):
    ident = Identity.of(record)
    assert ident.layers == record["identity"]["layers"] and ident.release_id == record["identity"]["release_id"]
    assert set(ident.layers) == set(LAYERS) and len(set(ident.layers.values())) == len(LAYERS)
    assert ident.short() == ident.release_id[:12] and len(ident.release_id) == 64


@pytest.mark.parametrize("layer", LAYERS)
def test_an_edit_changes_its_layer_and_every_descendant_only(record, layer):
    before = record["identity"]
    after = _recomputed(record, EDITS[layer])
    at = LAYERS.index(layer)
    changed = {name for name in LAYERS if after["layers"][name] != before["layers"][name]}
    assert changed == set(LAYERS[at:]), changed
    assert after["release_id"] != before["release_id"]


def test_a_relabelled_head_changes_its_label_keyed_digest_too(record):
    """Labels renamed (not permuted): scores keyed by label name are no longer the same scores."""
    before = record["identity"]
    labels = record["output"]["labels"]
    after = _recomputed(record, _set("output", "labels", value=[f"{x}-renamed" for x in labels]))
    assert after["head_by_label"] != before["head_by_label"]
    assert after["layers"]["calibration"] != before["layers"]["calibration"]


def test_the_same_fields_in_another_key_order_give_the_same_identity(record):
    body = {k: v for k, v in record.items() if k != "identity"}
    shuffled = json.loads(json.dumps(body, sort_keys=True))
    reversed_keys = {k: shuffled[k] for k in reversed(list(shuffled))}
    assert compute(reversed_keys, record["identity"]["weights"]) == compute(body, record["identity"]["weights"])
    assert digest({"b": 1, "a": [1, "é"]}) == digest({"a": [1, "é"], "b": 1})
    assert digest({"a": 1}) != digest({"a": 1.5})


@pytest.mark.parametrize("layer", LAYERS)
def test_an_edit_the_digests_do_not_follow_is_refused(record, layer):
    tampered = copy.deepcopy(record)
    weights = tampered["identity"]["weights"]
    EDITS[layer](tampered, weights)
    with pytest.raises(IdentityError, match=rf"identity\.layers\.{layer}\b"):
        Identity.of(tampered)


def test_a_record_without_an_identity_is_refused(record):
    body = {k: v for k, v in record.items() if k != "identity"}
    with pytest.raises(IdentityError, match="no identity section"):
        Identity.of(body)
    with pytest.raises(IdentityError, match="identity.scheme"):
        Identity.of(dict(record, identity=dict(record["identity"], scheme="readout-identity/0")))


def test_cache_keys_follow_the_layer_they_depend_on(record):
    ident = Identity.of(record)
    moved = Identity.of(_edited_and_recomputed(record, EDITS["calibration"]))
    # the edit is at calibration: contextual rows and raw scores are still valid, calibrated scores are not
    for kind, same in (("contextual", True), ("raw_scores", True), ("vectors", True),
                       ("calibrated_scores", False), ("decisions", False)):
        assert (cache_key(ident, kind, "onnx-fp32") == cache_key(moved, kind, "onnx-fp32")) is same, kind
    # a key is per target and per kind
    assert cache_key(ident, "raw_scores", "onnx-fp32") != cache_key(ident, "raw_scores", "onnx-int8")
    assert cache_key(ident, "raw_scores", "onnx-fp32") != cache_key(ident, "decisions", "onnx-fp32")
    from readout_sdk.errors import SdkError

    with pytest.raises((ValueError, SdkError), match="unknown layer"):
        cache_key(ident, "colour", "onnx-fp32")


def _edited_and_recomputed(record: dict, edit: Edit) -> dict:
    """The record after ``edit``, its identity recomputed as the build would (a legitimate new release)."""
    body = copy.deepcopy({k: v for k, v in record.items() if k != "identity"})
    weights = copy.deepcopy(record["identity"]["weights"])
    edit(body, weights)
    return body | {"identity": compute(body, weights)}
