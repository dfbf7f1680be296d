"""docs/architecture.md, "Adding a family" and "Adding a plugin family", followed.

The built-in recipe: a family written as step 1 says (here in the test module), its exporter resolver named as
step 4 says; the registry's checks must notice the steps left out (schema enums, budgets), and the exporter must
find the resolver through the family, the way it finds every built-in one.

The plugin recipe: the page's Python block and entry point, installed as a distribution (a module and its
``.dist-info``, as pip leaves it), must load as a plugin, build an artifact from a SYNTHETIC tiny BERT, run its
own manifest rule, give the vectors transformers' eager model gives (the oracle: the mean of
``last_hidden_state`` over the attended rows), and be served over HTTP by the generic ``/records`` route, with
every other route refused naming the family, never a 500. A recipe gone stale fails here."""
from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest

from helpers import synthetic
from helpers.docblocks import ROOT, blocks
from helpers.plugins import on_path, write_distribution
from readout_sdk import families
from readout_sdk.families import Family, REGISTRY
from readout_sdk.families.parts import BUILTIN_RESOLVERS, builtin_resolver
from readout_sdk.families.regression import RegressionFamily

PAGE = ROOT / "docs" / "architecture.md"
TEXTS = ["a short text", "a second text, somewhat longer than the first one", "third"]


def _section(title: str) -> list:
    """The fenced blocks of the page's section ``## title`` (up to the next ``## ``)."""
    text = PAGE.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    first, last = text.count("\n", 0, start) + 1, text.count("\n", 0, end if end > 0 else len(text)) + 1
    return [b for b in blocks(PAGE) if first <= b.line <= last]


# ---- the built-in recipe ---------------------------------------------------------------------------------------
class ScoredText(RegressionFamily):
    """Step 1: a family module's class (outputs, inputs, decision, metrics, record shape, head) ..."""

    name = "scored_text"
    metric_names = ("scored_text_error",)
    # step 4: its own manifest fields are resolved by a resolver in family_hooks, named from the family
    exporter_hooks = builtin_resolver("resolve_scored_text")


FAMILY = ScoredText()


def test_the_builtin_recipe_steps_are_each_checked(monkeypatch):
    from readout_export.planning import family_hooks

    calls = []
    monkeypatch.setitem(REGISTRY, FAMILY.name, FAMILY)  # step 1: the module listed in _MODULES
    monkeypatch.setattr(family_hooks, "resolve_scored_text", lambda plan, manifest: calls.append((plan, manifest)),
                        raising=False)
    assert families.get(FAMILY.name) is FAMILY
    # step 2 left out: the schemas' family enums no longer match the registry, which test_registry asserts
    for schema in ("manifest-1.schema.json", "readout-abi-1.schema.json"):
        doc = json.loads((ROOT / "abi_specs" / schema).read_text())
        enum = doc["properties"]["family"].get("enum") or doc["properties"]["family"]["anyOf"][0]["enum"]
        assert FAMILY.name not in enum and set(enum) != set(REGISTRY)
    # step 3 left out: its decision-level metric is gated at no precision
    budgets = json.loads((ROOT / "abi_specs" / "parity-budgets-1.json").read_text())
    assert all(not set(FAMILY.metric_names) & set(budgets[p]) for p in ("fp32", "fp16", "int8"))
    # step 4: the exporter finds the resolver through the family, as for every family
    hook = family_hooks.readout_hook(FAMILY.name)
    hook("plan", "manifest")
    assert calls == [("plan", "manifest")]


def test_every_builtin_resolver_is_named_by_its_family_and_no_table_picks_them():
    """Step 4 holds for the built-in families: each ``resolve_*`` of family_hooks is named by exactly one family's
    exporter part (``resolve_yes_no``: a step of the cross-encoder's, called by resolve.py), and readout_hook
    answers that function for that family, None for the others."""
    from readout_export.planning import family_hooks

    resolvers = {n for n in vars(family_hooks) if n.startswith("resolve_") and n != "resolve_yes_no"}
    named = {}
    for name, family in REGISTRY.items():
        ref = family.exporter_hooks.resolve
        if ref is not None:
            module, _, function = ref.partition(":")
            assert module == BUILTIN_RESOLVERS, (name, ref)
            named[function] = name
            assert family_hooks.readout_hook(name) is getattr(family_hooks, function)
        else:
            assert family_hooks.readout_hook(name) is None
    assert set(named) == resolvers and len(named) == len(set(named.values()))
    assert not [k for k, v in vars(family_hooks).items() if isinstance(v, dict) and set(v) & set(REGISTRY)]


# ---- the plugin recipe -----------------------------------------------------------------------------------------
def _plugin_source() -> tuple[str, dict[str, str]]:
    """The page's plugin module and its entry points (family -> "module:attribute")."""
    found = _section("Adding a plugin family")
    code = [b.code for b in found if b.language == "python"]
    toml = [b.code for b in found if b.language == "toml"]
    assert len(code) == 1 and len(toml) == 1, [b.where for b in found]
    points = tomllib.loads(toml[0])["project"]["entry-points"]["readout.families"]
    return code[0], points


@pytest.fixture(scope="module")
def plugin(tmp_path_factory):
    """(site, model, artifact): the recipe's plugin installed into ``site``, a SYNTHETIC tiny BERT and the artifact
    the recipe's manifest builds from it."""
    from readout_export.build import build

    root = tmp_path_factory.mktemp("recipe")
    code, points = _plugin_source()
    module = points["mean_rows"].split(":")[0]
    site = write_distribution(root / "site", "readout-mean-rows", "0.1.0", points, {module: code})
    model = synthetic.make_model("bert", "embedding", root / "model")
    (root / "manifest.json").write_text(json.dumps({"schema": "readout-export/manifest/1", "family": "mean_rows",
                                                    "model": "model", "output_dir": "artifact", "max_length": 32}))
    with on_path(site):
        art = build(root / "manifest.json").output_dir
    return site, model, art


def _oracle(model: Path, texts: list[str], max_length: int = 32) -> np.ndarray:
    """transformers' eager model: each text's mean of last_hidden_state over its attended rows."""
    import torch
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(str(model))
    eager = transformers.AutoModel.from_pretrained(str(model), attn_implementation="eager").eval()
    out = []
    for text in texts:
        enc = tok(text, truncation=True, max_length=max_length, return_tensors="pt")
        with torch.no_grad():
            out.append(eager(**enc).last_hidden_state[0].double().numpy().mean(0))
    return np.array(out)


def test_the_plugin_recipe_builds_a_family_the_sdk_runs(plugin):
    import readout_sdk

    site, model, art = plugin
    record = json.loads((art / "readout.json").read_text())["abi"]
    assert record["family"] == "mean_rows" and record["plugin"]["package"] == "readout-mean-rows"
    assert [o["name"] for o in record["outputs"]] == ["vector"]
    with on_path(site):
        family = families.get("mean_rows")
        assert isinstance(family, Family) and family.plugin is not None and family.http_routes == ("/records",)
        got = np.stack(readout_sdk.load(art).decide(TEXTS))
    np.testing.assert_allclose(got, _oracle(model, TEXTS), atol=1e-4)


def test_the_plugins_resolver_runs_in_the_build_as_a_builtin_ones_does(plugin, tmp_path):
    from readout_export.build import build
    from readout_export.errors import ReadoutExportError

    site, model, _ = plugin
    (tmp_path / "manifest.json").write_text(json.dumps({"schema": "readout-export/manifest/1", "family": "mean_rows",
                                                        "model": str(model), "output_dir": "artifact",
                                                        "max_length": 12}))
    with on_path(site), pytest.raises(ReadoutExportError, match=re.escape("$.max_length")) as refused:
        build(tmp_path / "manifest.json")
    assert "mean_rows reads at least 16 tokens" in str(refused.value)


def test_a_plugin_without_routes_is_served_by_records_and_refused_by_name_elsewhere(plugin):
    """POST /records and POST / answer the SDK's vectors; /embed and /predict refuse naming the family."""
    pytest.importorskip("starlette")
    import readout_sdk
    from starlette.testclient import TestClient

    from readout_sdk.serving.http.options import HttpOptions
    from readout_sdk.serving.http.server import build

    site, _, art = plugin
    with on_path(site):
        want = np.stack(readout_sdk.load(art).decide(TEXTS))
        app = build([f"m={art}"], HttpOptions())
        with TestClient(app, raise_server_exceptions=False) as client:
            replies = {route: client.post(route, json={"inputs": TEXTS}) for route in ("/records", "/", "/embed",
                                                                                         "/predict")}
    for route in ("/records", "/"):
        assert replies[route].status_code == 200, (route, replies[route].text)
        got = np.array([r["vector"] for r in replies[route].json()["results"]])
        np.testing.assert_allclose(got, want, atol=1e-5)
    for route in ("/embed", "/predict"):
        reply = replies[route]
        assert reply.status_code == 404 and "mean_rows" in reply.json()["error"], (route, reply.text)


def test_a_plugin_whose_first_route_is_not_served_here_gets_a_404_naming_it_on_post_root(plugin, monkeypatch):
    """Review finding: a plugin's HttpRoutes may name a route this server has no handler for; POST / then
    answered 500 (a KeyError). It is a 404 naming the family and the route."""
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from readout_sdk.serving.http.options import HttpOptions
    from readout_sdk.serving.http.server import build

    site, _, art = plugin
    with on_path(site):
        app = build([f"m={art}"], HttpOptions())
        served = app.state.server.models["m"]
        monkeypatch.setattr(type(served.family), "http_routes", ("/geometry",), raising=False)
        with TestClient(app, raise_server_exceptions=False) as client:
            root = client.post("/", json={"inputs": TEXTS})
    assert root.status_code == 404 and "mean_rows" in root.json()["error"] and "/geometry" in root.json()["error"], \
        root.text
