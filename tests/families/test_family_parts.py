"""The family contract (`readout_sdk.families.parts`, `compose`): what a plugin must give is a Core (name, input
kind, outputs, a decoder); each optional part left out answers its documented default (docs/architecture.md,
"The family contract"), never a crash; a malformed core or part is refused by name; a composed family is a Family
that the plugin loader accepts."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from helpers.plugins import on_path, write_distribution
from readout_sdk import families
from readout_sdk.errors import WrongCall
from readout_sdk.families import (Calibration, Core, Evaluation, ExporterHooks, Family, HttpRoutes, Parity,
                                  PartRefused, RecordStatement, Windows, compose)
from readout_sdk.families.base import TensorSpec

OUT = (TensorSpec("vector", "float32", ("batch", "dim")),)


class Decoder:
    def decide(self, ctx: Any, item: Any, outs: list, parts: Any, truncated: bool, **options: Any) -> Any:
        return outs[0]["vector"] * 2

    def record(self, result: Any) -> dict[str, Any]:
        return {"vector": list(result)}


def test_a_core_alone_is_a_family_with_every_default():
    family = compose(Core("plain", "text", OUT, Decoder()))
    assert isinstance(family, Family) and family.name == "plain" and family.kind.name == "text"
    assert family.decide(None, "x", [{"vector": np.array([1.0, 2.0])}], [], False).tolist() == [2.0, 4.0]
    assert family.records([np.array([1.5])]) == [{"vector": [1.5]}]
    assert family.http_routes == ("/records",)  # the generic typed route serves it
    assert family.aggregations == () and family.calibrators == () and family.task == ""
    assert family.agreement(None, [1], [1]) == {} and family.metric_names == ()
    assert family.readout_section(None) == {} and family.head_files("anywhere") == []
    with pytest.raises(WrongCall, match="plain"):
        family.arrow_types(None, None)
    with pytest.raises(WrongCall, match="plain"):
        family.relevance(None, [("q", "d")])
    with pytest.raises(NotImplementedError, match="plain"):
        family.export_module("model", {})
    with pytest.raises(PartRefused, match="plain gives no ExporterHooks.head"):
        family.head_for(None)


def test_each_part_sets_what_it_says():
    calls = []
    family = compose(Core("parted", "pair", OUT, Decoder(), fields=("query", "document")),
                     Windows(("mean",)), Calibration(("temperature",)), HttpRoutes(("/records", "/embed")),
                     Evaluation("relevance", lambda engine, pairs: np.ones(len(pairs))),
                     Parity(("same",), lambda ctx, got, ref: {"same": float(got == ref)}, {"fp32": {"same": {"min": 1}}}),
                     RecordStatement(score_types=("cosine",), decision="as is", record_keys=("vector",),
                                     stored_cache="vectors", vector_layer="head"),
                     ExporterHooks(head="HEAD", stages=("plugin",), module=lambda d, c: calls.append((d, c)) or "M",
                                   head_files=lambda d: [f"{d}/w.bin"], readout_section=lambda plan: {"k": plan}))
    assert family.aggregations == ("mean",) and family.calibrators == ("temperature",)
    assert family.http_routes == ("/records", "/embed") and family.task == "relevance"
    assert family.relevance(None, [("q", "d")] * 3).tolist() == [1.0, 1.0, 1.0]
    assert family.metric_names == ("same",) and family.agreement(None, [1], [1]) == {"same": 1.0}
    assert family.budgets == {"fp32": {"same": {"min": 1}}}
    assert (family.score_types, family.decision, family.record_keys) == (("cosine",), "as is", ("vector",))
    assert (family.stored_cache, family.vector_layer, family.head, family.stages) == ("vectors", "head", "HEAD",
                                                                                       ("plugin",))
    assert family.export_module("dir", {"c": 1}) == "M" and calls == [("dir", {"c": 1})]
    assert [str(p) for p in family.head_files("d")] == ["d/w.bin"] and family.readout_section(7) == {"k": 7}
    assert family.part(Windows) == Windows(("mean",)) and family.pair_roles is None


@pytest.mark.parametrize("make, words", [
    (lambda: Core("", "text", OUT, Decoder()), "Core.name"),
    (lambda: Core("x", "", OUT, Decoder()), "Core.input_kind"),
    (lambda: Core("x", "text", (), Decoder()), "Core.outputs"),
    (lambda: Core("x", "text", OUT, object()), "Core.decoder"),
    (lambda: HttpRoutes(()), "HttpRoutes.routes"),
    (lambda: compose(Core("x", "text", OUT, Decoder()), Windows(("mean",)), Windows(("mean",))), "two Windows"),
    (lambda: compose(Core("x", "text", OUT, Decoder()), {"task": "relevance"}), "not a family part"),
    (lambda: ExporterHooks(resolve="no_such_module_here:resolve").hook("resolve"), "ExporterHooks.resolve"),
])
def test_a_malformed_core_or_part_is_refused_by_name(make, words):
    with pytest.raises(PartRefused, match=words):
        make()


def test_the_plugin_loader_takes_a_composed_family(tmp_path):
    source = ("from readout_sdk.families import Core, compose\nfrom readout_sdk.families.base import TensorSpec\n\n\n"
              "class D:\n    def decide(self, ctx, item, outs, parts, truncated, **o):\n        return 1\n\n"
              "    def record(self, r):\n        return {'v': r}\n\n\n"
              "FAMILY = compose(Core('tiny_plugin', 'text', (TensorSpec('v', 'float32', ('batch',)),), D()))\n")
    site = write_distribution(tmp_path / "site", "tiny-plugin", "1.0", {"tiny_plugin": "tiny_plugin:FAMILY"},
                              {"tiny_plugin": source})
    with on_path(site):
        family = families.get("tiny_plugin")
        assert family.plugin is not None and family.plugin.package == "tiny-plugin"
        assert family.http_routes == ("/records",) and family.record(3) == {"v": 3}
