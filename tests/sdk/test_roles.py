"""Input roles (query/document prompts, default_prompt_name) and prompt-excluded pooling, against
sentence-transformers 6 (``encode(prompt_name=...)``, ``Pooling(include_prompt=False)``) on the REAL
MiniLM backbone saved in an asymmetric layout by sentence-transformers itself."""
from __future__ import annotations

import json

import numpy as np
import pytest

from helpers import synthetic

TEXTS = ["how much protein should a female eat", "summit define",
         "A kitten naps on the rug in the sun, and the dog barks twice at the door.", "Paris"]


@pytest.fixture(scope="module")
def asymmetric(shared):
    """(sentence-transformers model, its directory, the built artifact): include_prompt false, default query
    (the session's shared "roles" artifact, which the real-Triton test serves too)."""
    from sentence_transformers import SentenceTransformer

    model, artifact = shared("roles")
    return SentenceTransformer(str(model), device="cpu"), model, artifact


@pytest.fixture(scope="module")
def engine(asymmetric):
    import readout_sdk

    with readout_sdk.load(asymmetric[2]) as e:
        yield e


def test_record_states_roles_and_prompt_rows(engine):
    inp, readout = engine.abi["input"], engine.abi["readout"]
    assert inp["prompts"] == {"query": synthetic.QUERY_PROMPT, "document": synthetic.DOCUMENT_PROMPT}
    # [CLS] query : / [CLS] passage : (the trailing [SEP] of the prompt alone is not counted)
    assert inp["roles"] == {"default": "query", "prompt_tokens": {"query": 3, "document": 3}}
    assert readout["prompt_rows"] == "excluded"
    assert [i["name"] for i in engine.abi["inputs"]][-1] == "prompt_rows"
    assert set(engine.roles) == {"query", "document"} and engine.default_role == "query"


@pytest.mark.parametrize("role", ["query", "document"])
def test_each_role_matches_sentence_transformers(asymmetric, engine, role):
    st = asymmetric[0]
    got = engine.embed(TEXTS, role=role)
    want = st.encode(TEXTS, prompt_name=role)
    assert got.role == role
    np.testing.assert_allclose(got.vectors, want, atol=2e-6)


def test_default_role_applies_when_none_is_named(asymmetric, engine):
    got = engine.embed(TEXTS)
    assert got.role == "query"
    np.testing.assert_allclose(got.vectors, asymmetric[0].encode(TEXTS), atol=2e-6)  # ST's default_prompt_name


def test_prompt_rows_are_attended_but_not_pooled(asymmetric, engine):
    """The exclusion is real: pooling the prompt rows too (include_prompt true, same weights) is another
    vector, and so is the text without its prompt."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as M

    st = asymmetric[0]
    pooled_too = SentenceTransformer(modules=[st[0], M.Pooling(384, pooling_mode="mean", include_prompt=True),
                                              M.Normalize()], device="cpu")
    ours = engine.embed(TEXTS, role="document").vectors
    assert np.abs(ours - pooled_too.encode(TEXTS, prompt=synthetic.DOCUMENT_PROMPT)).max() > 1e-2
    assert np.abs(ours - st.encode(TEXTS, prompt="")).max() > 1e-2


@pytest.mark.parametrize("side", ["left", "right"])
def test_prompt_rows_under_both_padding_sides(asymmetric, engine, side):
    """The graph counts prompt rows among valid rows, so left padding excludes the same rows."""
    from readout_sdk.batching import feed_for

    role = engine.role("document")
    parts = [g[0] for g in engine.family_spec.encode(engine.context, 0, TEXTS, role=role)]
    feed = feed_for(engine.abi, parts, side)
    got = engine.run(**feed)["embeddings"]
    np.testing.assert_allclose(got, asymmetric[0].encode(TEXTS, prompt_name="document"), atol=2e-6)


def test_undeclared_role_and_empty_texts_are_refused(engine):
    from readout_sdk.errors import InputRefused, WrongCall

    with pytest.raises(WrongCall, match=r"role 'passage' is not declared by this artifact; its roles are "
                                        r"\['document', 'query'\]"):
        engine.embed(TEXTS, role="passage")
    # the prompt's rows are not the text: an empty text under a role still has nothing to pool
    with pytest.raises(InputRefused, match="item 1: the text has no content tokens"):
        engine.embed(["fine", "  "], role="query")


def test_pipelined_call_applies_the_role_as_the_serial_one(asymmetric):
    import readout_sdk
    from readout_sdk.errors import InputRefused

    with readout_sdk.load(asymmetric[2], prefetch=64) as piped:
        many = TEXTS * 40
        np.testing.assert_allclose(piped.embed(many, batch_size=16, role="document").vectors,
                                   asymmetric[0].encode(many, prompt_name="document"), atol=2e-6)
        with pytest.raises(InputRefused, match="item 3: the text has no content tokens"):
            piped.embed(["a", "b", "c", ""], role="document", batch_size=2)


def test_cache_keys_differ_by_role(engine):
    assert engine.cache_key("vectors") == engine.cache_key("vectors", role="query")
    assert engine.cache_key("vectors", role="document") != engine.cache_key("vectors", role="query")
    # a role that changes nothing (sentence-transformers 6 saves empty prompts) keys as no role
    from readout_sdk.roles import Role, input_policy

    assert input_policy(Role("query", "", 0)) is None and input_policy(engine.role("query")) is not None


def test_serving_records_carry_the_role(asymmetric, engine):
    from readout_sdk.serving.records import predict_records, serving_fields

    assert serving_fields(engine.abi) == ("text", "role")
    rows = [{"text": TEXTS[0], "role": "query"}, {"text": TEXTS[0], "role": b"document"}, {"text": TEXTS[1]}]
    records = predict_records(engine, rows)
    st = asymmetric[0]
    assert [r["role"] for r in records] == ["query", "document", "query"]
    np.testing.assert_allclose(records[0]["embedding"], st.encode(TEXTS[0], prompt_name="query"), atol=2e-6)
    np.testing.assert_allclose(records[1]["embedding"], st.encode(TEXTS[0], prompt_name="document"), atol=2e-6)
    np.testing.assert_allclose(records[2]["embedding"], st.encode(TEXTS[1], prompt_name="query"), atol=2e-6)


def test_pytriton_infer_function_reads_the_role_column(asymmetric, engine):
    """`readout-export serve`'s infer function (what PyTriton calls with each request's BYTES columns)."""
    from readout_sdk.serving.serve import infer_function

    request = {"text": np.array([[t.encode()] for t in TEXTS[:2]], dtype=object),
               "role": np.array([[b"document"], [b""]], dtype=object)}
    (reply,) = infer_function(engine)([request])
    records = [json.loads(r[0]) for r in reply["result"]]
    assert [r["role"] for r in records] == ["document", "query"]  # an empty role is the default
    np.testing.assert_allclose(records[0]["embedding"], asymmetric[0].encode(TEXTS[0], prompt_name="document"),
                               atol=2e-6)
    assert reply["release_id"][0][0].decode() == engine.release_id


def test_ray_predictor_encodes_under_its_role(asymmetric):
    pa = pytest.importorskip("pyarrow")
    from readout_sdk.serving.ray import Predictor

    out = Predictor(str(asymmetric[2]), role="document")(pa.table({"text": TEXTS}))
    assert out.column("role").to_pylist() == ["document"] * len(TEXTS)
    np.testing.assert_allclose(np.array(out.column("embedding").to_pylist(), np.float32),
                               asymmetric[0].encode(TEXTS, prompt_name="document"), atol=2e-6)


def test_triton_repository_declares_the_role_and_prompt_rows(asymmetric):
    pytest.importorskip("tritonclient")
    from readout_sdk.artifact import open_artifact
    from readout_export.triton_repo import graph_config, pick_target, text_config

    art = open_artifact(asymmetric[2])
    target = pick_target(art, None)
    text = {i.name: i for i in text_config(art, target, "m", "m_graph", 8, 8).input}
    assert text["role"].optional and not text["text"].optional
    graph = {i.name: i for i in graph_config(art, target, "m_graph", 8).input}
    assert list(graph["prompt_rows"].dims) == [1] and list(graph["prompt_rows"].reshape.shape) == []


def test_parity_runs_every_role(asymmetric):
    from readout_parity.harness import run_parity

    report = run_parity(asymmetric[2], widths=(1, 3))
    assert sorted(report.corpus["roles"]) == ["document", "query"]
    assert report.exit_code() == 0
