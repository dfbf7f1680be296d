"""The architecture matrix (issue 45, point 3): each architecture people ship x embedding, sequence
classification, and token classification and extractive QA where transformers has the head
(tests/helpers/architectures.py: every model SYNTHETIC, built here, with the tokenizer class and special-token
layout of its public checkpoints, saved by sentence-transformers 6 or transformers as users save them).

Per cell: the build succeeds; the SDK on one mixed-length batch, right-padded (its own batching) and left-padded
(the same parts fed through ``Engine.run``), equals eager on each item alone, unpadded (<= 1e-5;
sentence-transformers ``encode`` for the embedding models, transformers for heads); and ``readout-export
parity`` exits 0. Builds are shared across the module's tests (one per model).

The default run takes ``SLICE`` (one sentence-transformers-saved encoder embedding, one decoder classifier,
ModernBERT with a window shorter than the texts: the ``slice-*`` cases); ``pytest -m architectures`` runs the
whole matrix, the slice's cells included. With
``READOUT_ARCHITECTURES_JSON=tests/helpers/architectures.json`` the run records what it measured per cell
(docs/architectures.md is generated from it by docs/generate.py).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from helpers import architectures as A
from helpers import oracles
from helpers.corpus import PAIRS, TEXTS
from helpers.measured import record_error

TOLERANCE = 1e-5
LONG = " ".join([TEXTS[-1]] * 3)  # past max_length (128) for every tokenizer here, past every local window
ITEMS = {"text": list(TEXTS) + [LONG], "pair": list(PAIRS)}
OUTPUTS = {"embedding": ("embeddings",), "sequence_classification": ("logits",),
           "token_classification": ("token_logits",), "extractive_qa": ("start_logits", "end_logits")}
RESULTS: dict[str, dict] = {}


# every cell under the marker; the slice's cells once more, unmarked, for the default run
CELLS = [pytest.param(c, id=c.id, marks=pytest.mark.architectures) for c in A.matrix()] + \
        [pytest.param(c, id=f"slice-{c.id}") for c in A.SLICE]
# a cell that differs from eager for a known reason (A.KNOWN) is an xfail, strict: once fixed, it says so
SDK_CELLS = [pytest.param(*p.values, id=p.id, marks=(*p.marks, pytest.mark.xfail(strict=True, reason=A.KNOWN[p.values[0].id]))
             if p.values[0].id in A.KNOWN else p.marks) for p in CELLS]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """built(cell) -> (model_dir, artifact_dir), one build per cell for the module; a failed build is raised
    again, not retried."""
    from readout_export.build import build

    cache: dict = {}

    def get(cell: A.Cell):
        if cell not in cache:
            root = tmp_path_factory.mktemp(cell.id)
            try:
                model = A.make(cell, root / "model")
                doc = {"schema": "readout-export/manifest/1", "model": str(model), "output_dir": str(root / "artifact"),
                       "family": cell.family}
                (root / "manifest.json").write_text(json.dumps(doc))
                cache[cell] = (model, build(root / "manifest.json").output_dir)
            except Exception as e:  # noqa: BLE001  (kept, and raised for each test of the cell)
                cache[cell] = e
        if isinstance(cache[cell], Exception):
            RESULTS.setdefault(cell.id, {})["build"] = f"failed: {type(cache[cell]).__name__}"
            raise cache[cell]
        RESULTS.setdefault(cell.id, {})["build"] = "ok"
        return cache[cell]

    yield get
    out = os.environ.get("READOUT_ARCHITECTURES_JSON")
    if out and RESULTS:
        path = Path(out)
        old = json.loads(path.read_text()) if path.is_file() else {}
        path.write_text(json.dumps({**old, **RESULTS}, indent=1, sort_keys=True) + "\n")


def _items(cell: A.Cell) -> list:
    return ITEMS["pair" if cell.family == "extractive_qa" else "text"]


def _eager(cell: A.Cell, model_dir: Path, items: list, max_length: int) -> list[dict[str, np.ndarray]]:
    if cell.family == "embedding":
        return oracles.sentence_transformers_embeddings(model_dir, items)
    return oracles.transformers_outputs(cell.family, model_dir, items, max_length)


def _sdk(engine, items: list, side: str) -> list[dict[str, np.ndarray]]:
    """Each item's first part's raw outputs from one mixed batch of every item: ``right`` through the SDK's own
    batching, ``left`` through ``Engine.run`` on the same parts padded on the left."""
    from readout_sdk.batching import feed_for, split_rows

    if side == "right":
        return [parts[0] for parts in engine.raw_outputs(items, batch_size=len(items))]
    groups = engine.family_spec.encode(engine.context, 0, items, role=engine.role(None))
    firsts = [g[0] for g in groups]
    feed = feed_for(engine.abi, firsts, "left")
    return split_rows(engine.abi, engine.run(**feed), feed)


@pytest.mark.parametrize("cell", SDK_CELLS)
def test_sdk_equals_eager_on_each_item_alone(cell: A.Cell, built):
    import readout_sdk

    model_dir, artifact = built(cell)
    items = _items(cell)
    with readout_sdk.load(artifact) as engine:
        record = engine.abi
        assert record["contextual_state"]["model_type"] == cell.arch
        expected = _eager(cell, model_dir, items, record["input"]["max_length"])
        worst, over = 0.0, []
        for side in ("right", "left"):
            got = _sdk(engine, items, side)
            assert len(got) == len(expected)
            for i, (g, e) in enumerate(zip(got, expected)):
                for name in OUTPUTS[cell.family]:
                    assert g[name].shape == e[name].shape, f"{name}, item {i}, {side}: {g[name].shape} vs {e[name].shape}"
                    err = float(np.max(np.abs(g[name].astype(np.float64) - e[name])))
                    worst = max(worst, err)
                    if err > TOLERANCE:
                        over.append(f"{name}, item {i}, {side} padding: error {err:.3g}")
        RESULTS.setdefault(cell.id, {})["max_abs_error"] = worst  # recorded before the verdict, failing or not
        assert not over, over[:5]
        if cell.family == "sequence_classification":  # the decision too, by name
            labels = [r.label for r in engine.classify(items)]
            assert labels == [A.SENTIMENT[int(np.argmax(e["logits"]))] for e in expected]
    record_error(f"architecture matrix / {cell.id}", worst, "SDK mixed batch vs eager alone")


@pytest.mark.parametrize("cell", CELLS)
def test_parity_exits_0(cell: A.Cell, built):
    from readout_export.reference import check_parity

    report = check_parity(built(cell)[1], widths=(1, 7))
    failed = [f"{c.target}/{c.provider}/{c.metric}={c.measured}" for c in report.checks if c.decision == "FAIL"]
    RESULTS.setdefault(cell.id, {})["parity_exit"] = report.exit_code()
    assert report.exit_code() == 0, failed


@pytest.mark.parametrize("arch,option", [
    pytest.param("modernbert", "local_attention", id="modernbert", marks=pytest.mark.architectures),
    pytest.param("gemma3_text", "sliding_window", id="gemma3_text", marks=pytest.mark.architectures),
    pytest.param("modernbert", "local_attention", id="slice-modernbert"),
])
def test_the_local_window_binds(arch, option, built):
    """The local attention window is shorter than the long texts: the same weights attending globally give
    other vectors, so a graph that ignored the window could not have passed the equality above."""
    from sentence_transformers import SentenceTransformer

    model_dir, _ = built(A.Cell(arch, "embedding"))
    windowed = SentenceTransformer(str(model_dir), device="cpu")
    wide_open = SentenceTransformer(str(model_dir), device="cpu", config_kwargs={option: 4 * A.MAX_LENGTH})
    backbone = wide_open[0].auto_model.config
    assert getattr(backbone, option) >= A.MAX_LENGTH
    a, b = windowed.encode([LONG, TEXTS[0]]), wide_open.encode([LONG, TEXTS[0]])
    assert np.abs(a[0] - b[0]).max() > 100 * TOLERANCE  # the long text: the window changes it
    assert np.abs(a[1] - b[1]).max() < TOLERANCE  # "Hello" (5 rows or fewer) fits inside the window


@pytest.mark.architectures
def test_embeddinggemma_needs_its_dense_layers(built):
    """EmbeddingGemma's two Dense layers are in the graph: the same model without them (what a port that
    dropped them computes) points elsewhere, while the artifact equals the full model."""
    import readout_sdk
    from sentence_transformers import SentenceTransformer

    model_dir, artifact = built(A.Cell("gemma3_text", "embedding"))
    full = SentenceTransformer(str(model_dir), device="cpu")
    assert [type(m).__name__ for m in full] == ["Transformer", "Pooling", "Dense", "Dense", "Normalize"]
    dropped = SentenceTransformer(modules=[full[0], full[1], full[4]], device="cpu")
    with readout_sdk.load(artifact) as engine:
        ours = engine.embed(TEXTS).vectors
    np.testing.assert_allclose(ours, full.encode(TEXTS), atol=TOLERANCE)
    assert np.abs((ours * dropped.encode(TEXTS)).sum(-1)).max() < 0.9
