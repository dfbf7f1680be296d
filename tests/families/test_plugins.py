"""Readout families defined outside the package (issue 36 parts 3 and 4): the worked example
examples/plugins/readout-geometry, installed with pip as a user installs it, builds, passes parity, loads in the
SDK and serves over HTTP without changes to readout-export; a missing plugin, another contract and another
package are refused by name.

Models: the REAL all-MiniLM-L6-v2 backbone with a LoRA adapter made by peft (seeded lora_B) and a SEEDED geometry
head saved by the plugin's own save_head. Oracles: peft's eager model with the adapter applied (unmerged), the
head's arithmetic written out here in numpy (not the plugin's module), and the Lorentz distance from its
definition (arccosh of the Minkowski inner product) in float64.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import byom
from helpers.plugins import GEOMETRY, make_geometry_model, on_path, pip_install, write_distribution

FIELDS = ("query", "title", "description", "examples", "excludes")
ITEMS = [  # queries (one text: the query channel) and codes (some of the four code channels)
    "sell shoes online",
    {"query": "wheat farming"},
    {"title": "Wheat Farming", "description": "growing wheat", "examples": "durum wheat farms",
     "excludes": "wheat flour milling"},
    {"title": "Shoe Stores", "description": "retailing footwear"},
    {"title": "Software Publishers"},
    {"description": "Publishing computer software, including apps.", "excludes": "custom programming services"},
    {"title": "Electronic Shopping", "examples": "online retailers"},
    {"query": "software for accountants"},
]


def _with_site(site: Path) -> str:
    """PYTHONPATH for a new process: the plugin's site first, then whatever this process was given (a checkout's
    source folders), as a user's environment would have it."""
    return os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)


def _site(tmp: Path) -> Path:
    return pip_install(GEOMETRY, tmp / "site")


@pytest.fixture(scope="module")
def geometry(tmp_path_factory):
    """(site, model, adapter, artifact): the plugin installed by pip into ``site``, the MiniLM backbone with a
    hyperbolic head (R = 4, d = 16), a LoRA adapter over the backbone, and the built artifact."""
    from readout_export.build import build

    root = tmp_path_factory.mktemp("geometry")
    site = _site(root)
    model = make_geometry_model(root / "model")
    adapter = byom.make_lora(model, root / "adapter")
    manifest = {"schema": "readout-export/manifest/1", "family": "geometry", "model": "model", "adapter": "adapter",
                "output_dir": "artifact", "max_length": 48}
    (root / "manifest.json").write_text(json.dumps(manifest))
    with on_path(site):
        art = build(root / "manifest.json").output_dir
    return site, model, adapter, art


def _oracle(model: Path, adapter: Path, items: list, max_length: int = 48) -> dict[str, np.ndarray]:
    """The geometry head computed independently: peft's unmerged model per channel (marker + text), each
    channel's mean over its attended rows, the mean over present channels, the head's Linear read from its
    safetensors file, then r = R tanh(|v|/R), u = v/|v|, t = r u."""
    import torch
    import transformers
    from safetensors.numpy import load_file

    config = json.loads((model / "geometry" / "config.json").read_text())
    markers = {c["field"]: c["marker"] for c in config["channels"]}
    weights = load_file(str(model / "geometry" / "model.safetensors"))
    tok = transformers.AutoTokenizer.from_pretrained(str(model), local_files_only=True)
    eager = byom.peft_eager(model, adapter)
    tangents, radii, directions = [], [], []
    for item in items:
        item = {"query": item} if isinstance(item, str) else item
        pooled = []
        for field in FIELDS:
            if field not in item:
                continue
            enc = tok(markers[field] + item[field], truncation=True, max_length=max_length, return_tensors="pt")
            with torch.no_grad():
                h = eager(**enc).last_hidden_state[0].double().numpy()
            pooled.append(h.mean(0))
        v = weights["linear.weight"].astype(np.float64) @ np.mean(pooled, 0) + weights["linear.bias"]
        norm = np.linalg.norm(v)
        r = config["radius_bound"] * np.tanh(norm / config["radius_bound"])
        tangents.append(r * v / norm)
        radii.append(r)
        directions.append(v / norm)
    return {"tangent": np.array(tangents), "radius": np.array(radii), "direction": np.array(directions)}


def test_the_artifact_states_the_plugin_its_channels_and_its_geometry(geometry):
    site, _, _, art = geometry
    record = json.loads((art / "readout.json").read_text())["abi"]
    assert record["family"] == "geometry"
    assert record["plugin"] == {"package": "readout-geometry", "version": "0.1.0", "contract": "readout-family/1"}
    assert [c["field"] for c in record["input"]["channels"]] == list(FIELDS)
    assert [i["axes"] for i in record["inputs"][:2]] == [["batch", "channels", "sequence"]] * 2
    assert [o["name"] for o in record["outputs"]] == ["tangent", "radius", "direction"]
    assert record["output"]["score_type"] == "distance"
    assert record["output"]["geometry"] == {"arm": "hyperbolic", "radius_bound": 4.0, "distance":
                                            record["output"]["geometry"]["distance"]}
    assert record["adapter"]["method"] == "LORA" and record["adapter"]["backbone_sha256"]
    from readout_sdk.release.identity import layer_fields

    fields = layer_fields(record, record["identity"]["weights"])
    assert fields["head"]["plugin"] == {"package": "readout-geometry", "contract": "readout-family/1"}
    assert fields["head"]["head_sha256"]  # the head's own files, hashed
    assert fields["contextual"]["adapter_sha256"]
    env = dict(os.environ, PYTHONPATH=_with_site(site))
    shown = subprocess.run([str(Path(sys.executable).parent / "readout-export"), "inspect", str(art)],
                           capture_output=True, text=True, env=env, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "family geometry (plugin readout-geometry 0.1.0, readout-family/1)" in shown.stdout


def test_sdk_points_equal_peft_and_the_heads_arithmetic(geometry):
    import readout_sdk

    site, model, adapter, art = geometry
    with on_path(site):
        engine = readout_sdk.load(art)
        points = engine.decide(ITEMS)
        again = engine.predict(ITEMS[2:4])
    want = _oracle(model, adapter, ITEMS)
    got = {"tangent": np.stack([p.tangent for p in points]), "radius": np.array([p.radius for p in points]),
           "direction": np.stack([p.direction for p in points])}
    for key in want:
        np.testing.assert_allclose(got[key], want[key], atol=1e-4, rtol=0, err_msg=key)
    assert np.all(want["radius"] < 4.0) and np.ptp(want["radius"]) > 0.5  # bounded by R, and spread
    np.testing.assert_allclose(again[0].tangent, points[2].tangent, atol=1e-6)
    # the arm's distance, as the family computes it from the SDK's outputs, is the Lorentz distance
    with on_path(site):
        from readout_geometry.distance import pairwise
        d = pairwise("hyperbolic", got, got)
    x = np.concatenate([np.cosh(want["radius"])[:, None], np.sinh(want["radius"])[:, None] * want["direction"]], 1)
    inner = x[:, None, 0] * x[None, :, 0] - x[:, 1:] @ x[:, 1:].T
    lorentz = np.arccosh(np.maximum(inner, 1.0))
    far = ~np.eye(len(ITEMS), dtype=bool)
    np.testing.assert_allclose(d[far], lorentz[far], atol=1e-3)


def test_parity_gates_distance_and_neighbourhood_against_unmerged_peft(geometry, tmp_path):
    site, _, _, art = geometry
    corpus = tmp_path / "corpus.jsonl"
    more = [{"query": "growing corn"}, {"title": "Corn Farming", "examples": "sweet corn"}, {"query": "web shops"},
            {"title": "Bookstores", "description": "retailing new books", "excludes": "used books"},
            {"examples": "payroll software", "title": "Software"}, {"query": "a bakery"},
            {"title": "Bakeries", "description": "baking bread and cakes for sale"}, {"query": "shoe repair"}]
    rows = [{"query": i} if isinstance(i, str) else i for i in ITEMS] + more  # distinct: no tied neighbours
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = dict(os.environ, PYTHONPATH=_with_site(site))  # a new process finds the plugin as any installed package
    done = subprocess.run([str(Path(sys.executable).parent / "readout-export"), "parity", str(art), "--corpus",
                           str(corpus), "--widths", "1,7", "--report", str(tmp_path / "parity.json")],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    report = json.loads((tmp_path / "parity.json").read_text())
    gated = {(c["target"], c["provider"], c["metric"]): c for c in report["checks"] if c["decision"] == "PASS"}
    for metric in ("distance_abs_error", "neighbourhood_overlap", "radius_abs_error", "max_abs_error"):
        assert ("onnx-fp32", "CPUExecutionProvider", metric) in gated, sorted(gated)
    assert gated[("onnx-fp32", "CPUExecutionProvider", "distance_abs_error")]["measured"] <= 1e-4
    assert "unmerged" in json.dumps(report)  # the reference is the eager peft model with the adapter applied


def test_served_over_http_as_the_sdk_returns_them(geometry, monkeypatch):
    import httpx
    import readout_sdk

    from helpers.http_server import HttpServer

    site, _, _, art = geometry
    with on_path(site):
        engine = readout_sdk.load(art)
        want = [engine.family_spec.record(p) for p in engine.decide(ITEMS[:4])]
    monkeypatch.setenv("PYTHONPATH", _with_site(site))
    with HttpServer([f"codes={art}"]) as server:
        reply = httpx.post(f"{server.url}/records", json={"inputs": [{"query": ITEMS[0]}, *ITEMS[1:4]]}, timeout=60)
        assert reply.status_code == 200, reply.text
        body = reply.json()
        text = httpx.post(f"{server.url}/records", json={"inputs": ITEMS[0]}, timeout=60)  # a text is a query
        wrong = httpx.post(f"{server.url}/embed", json={"inputs": ITEMS[0]}, timeout=60)
        # the plugin names no HTTP route of its own: POST / is the generic /records, the other routes refuse it
        # naming the family, never a 500
        root = httpx.post(f"{server.url}/", json={"inputs": ITEMS[1:4]}, timeout=60)
        predict = httpx.post(f"{server.url}/predict", json={"inputs": ITEMS[0]}, timeout=60)
    assert root.status_code == 200, root.text
    for got, exp in zip(root.json()["results"], want[1:4], strict=True):
        np.testing.assert_allclose(got["tangent"], exp["tangent"], atol=1e-5)
    for refused in (wrong, predict):
        assert refused.status_code == 404 and "geometry" in refused.json()["error"], refused.text
    assert body["model"] == "codes" and body["release_id"]
    for got, exp in zip(body["results"], want):
        np.testing.assert_allclose(got["tangent"], exp["tangent"], atol=1e-5)
        assert abs(got["radius"] - exp["radius"]) < 1e-5
    assert text.status_code == 200 and np.allclose(text.json()["results"][0]["tangent"], want[0]["tangent"], atol=1e-5)
    assert wrong.status_code == 404 and "/records" in wrong.text


def test_ray_data_columns_are_the_plugins_records(geometry):
    """Ray Data's predictor (what `readout-export encode` runs per batch): one column per field, null where a
    field is absent; the family's own record keys and Arrow types come back, equal to the SDK's."""
    import pyarrow as pa
    import readout_sdk
    from readout_sdk.serving.ray import Predictor

    site, _, _, art = geometry
    rows = [{"query": i} if isinstance(i, str) else i for i in ITEMS]
    table = pa.table({f: pa.array([r.get(f) for r in rows], pa.string()) for f in FIELDS})
    with on_path(site):
        out = Predictor(art)(table)
        want = readout_sdk.load(art).decide(ITEMS)
    assert out.schema.field("tangent").type == pa.list_(pa.float32()) and out.schema.field("radius").type == pa.float64()
    np.testing.assert_allclose(np.array(out.column("tangent").to_pylist()), np.stack([p.tangent for p in want]), atol=1e-6)
    np.testing.assert_allclose(out.column("radius").to_pylist(), [p.radius for p in want], atol=1e-6)


def test_evaluation_ranks_by_the_arms_distance(geometry, tmp_path):
    """readout_eval's relevance task on the plugin: nDCG@10 per query equals scikit-learn's on minus the
    arm's distance between the query's and each document's point."""
    import readout_sdk
    from sklearn.metrics import ndcg_score

    from readout_eval.run import evaluate

    site, _, _, art = geometry
    ranking = [("wheat farming", ["Wheat Farming", "Shoe Stores", "Software Publishers", "Bakeries"], [0]),
               ("sell shoes online", ["Electronic Shopping", "Shoe Stores", "Corn Farming"], [0, 1]),
               ("payroll software", ["Bookstores", "Software Publishers", "Wheat Farming"], [1])]
    data = tmp_path / "ranking.jsonl"
    data.write_text("".join(json.dumps({"id": f"q{i}", "query": q, "documents": d, "relevant": r}) + "\n"
                            for i, (q, d, r) in enumerate(ranking)))
    with on_path(site):
        report = evaluate(art, data, "test", keep=False)
        engine = readout_sdk.load(art)
        from readout_geometry.family import distances  # the plugin's own distance under the record's arm

        for case, (q, docs, relevant) in zip(report["cases"], ranking):
            points = engine.decide([q, *docs])
            score = -distances(engine.context, points[:1], points[1:])[0]
            gains = [1 if i in relevant else 0 for i in range(len(docs))]
            assert abs(case["value"] - ndcg_score([gains], [score], k=10)) < 1e-9, case["id"]


def test_a_missing_plugin_is_refused_by_name(geometry):
    import readout_sdk
    from readout_sdk.errors import SdkError

    with pytest.raises(SdkError) as e:  # one line, naming readout.json and the package to install
        readout_sdk.load(geometry[3])
    assert "readout.json" in str(e.value) and "'readout-geometry'" in str(e.value) and "not installed" in str(e.value)
    assert "pip install" in str(e.value)
    assert "\n" not in str(e.value)


def test_a_plugin_of_another_contract_is_refused_by_name(geometry, tmp_path):
    import readout_sdk
    from readout_sdk.errors import SdkError

    source = ("from readout_sdk.families.base import Family\n\n\nclass Geometry(Family):\n    name = 'geometry'\n"
              "    contract = 'readout-family/2'\n\n\nFAMILY = Geometry()\n")
    site = write_distribution(tmp_path / "v2", "readout-geometry", "0.2.0", {"geometry": "geometry_v2:FAMILY"},
                              {"geometry_v2": source})
    with on_path(site), pytest.raises(SdkError) as e:
        readout_sdk.load(geometry[3])
    message = str(e.value)
    assert "readout-geometry 0.2.0" in message and "'readout-family/2'" in message and "'readout-family/1'" in message


def test_another_package_under_the_same_family_name_is_refused(geometry, tmp_path):
    import readout_sdk
    from readout_sdk.errors import SdkError

    site = write_distribution(tmp_path / "other", "other-geometry", "1.0", {"geometry": "readout_geometry.family:FAMILY"},
                              {})
    with on_path(site, geometry[0]), pytest.raises(SdkError) as e:
        readout_sdk.load(geometry[3])
    assert "several packages" in str(e.value) and "other-geometry" in str(e.value)


def test_a_plugin_cannot_replace_a_builtin_family(tmp_path):
    from readout_sdk.families import REGISTRY, get, plugins

    source = "from readout_sdk.families.base import Family\n\n\nclass E(Family):\n    name = 'embedding'\n\n\nFAMILY = E()\n"
    site = write_distribution(tmp_path / "clash", "clash-plugin", "1.0", {"embedding": "clash:FAMILY"},
                              {"clash": source})
    with on_path(site):
        assert get("embedding") is REGISTRY["embedding"]  # the built-in wins
        with pytest.raises(plugins.PluginRefused, match="built-in family.*clash-plugin"):
            plugins.load("embedding", frozenset(REGISTRY))


def test_a_head_checkpoint_of_another_contract_is_refused_at_validate_and_build(tmp_path):
    from readout_export.build import build, validate
    from readout_export.errors import ManifestError

    site = _site(tmp_path)
    make_geometry_model(tmp_path / "model", contract="geometry-head/0")
    (tmp_path / "manifest.json").write_text(json.dumps({"schema": "readout-export/manifest/1", "family": "geometry",
                                                        "model": "model", "output_dir": "artifact"}))
    with on_path(site):
        for step in (validate, build):
            with pytest.raises(ManifestError) as e:
                step(tmp_path / "manifest.json")
            assert e.value.path == "$.model" and "'geometry-head/0'" in str(e.value) and "'geometry-head/1'" in str(e.value)
    assert not (tmp_path / "artifact").exists()
    # without the plugin, the family is unknown, and the refusal says which plugin families are installed
    with pytest.raises(ManifestError, match=r"\$\.family"):
        validate(tmp_path / "manifest.json")


@pytest.mark.parametrize("arm", ["euclidean", "spherical"])
def test_the_flat_arms_export_their_own_geometry(arm, tmp_path):
    """The euclidean and spherical heads (no adapter) as the graph computes them, against the head's arithmetic
    (numpy) over eager transformers."""
    import readout_sdk
    import torch
    import transformers
    from safetensors.numpy import load_file

    from readout_export.build import build

    site = _site(tmp_path)
    model = make_geometry_model(tmp_path / "model", geometry=arm, seed=3)
    (tmp_path / "manifest.json").write_text(json.dumps({"schema": "readout-export/manifest/1", "family": "geometry",
                                                        "model": "model", "output_dir": "artifact", "max_length": 32}))
    with on_path(site):
        art = build(tmp_path / "manifest.json").output_dir
        points = readout_sdk.load(art).decide(ITEMS[:4])
    eager = transformers.AutoModel.from_pretrained(str(model), local_files_only=True).eval()
    tok = transformers.AutoTokenizer.from_pretrained(str(model), local_files_only=True)
    w = load_file(str(model / "geometry" / "model.safetensors"))
    for item, p in zip(ITEMS[:4], points):
        item = {"query": item} if isinstance(item, str) else item
        pooled = []
        for field in FIELDS:
            if field in item:
                with torch.no_grad():
                    h = eager(**tok(f"{field}: {item[field]}", return_tensors="pt")).last_hidden_state[0]
                pooled.append(h.double().numpy().mean(0))
        v = w["linear.weight"].astype(np.float64) @ np.mean(pooled, 0) + w["linear.bias"]
        u = v / np.linalg.norm(v)
        np.testing.assert_allclose(p.direction, u, atol=1e-4)
        if arm == "euclidean":
            np.testing.assert_allclose(p.tangent, v, atol=1e-4)
            assert abs(p.radius - np.linalg.norm(v)) < 1e-4
        else:
            np.testing.assert_allclose(p.tangent, u, atol=1e-4)
            assert p.radius == 1.0
