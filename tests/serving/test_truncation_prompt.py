"""Which end a too-long input loses under a role whose prompt is prepended (issue 47's review), with
sentence-transformers as the oracle: it prepends the prompt to the text and lets the tokenizer cut from its
side, so a left cut removes the prompt first.

- An artifact whose tokenizer cuts from the right (the usual): the prompt always survives, whatever side the
  record states or ``truncation_side="right"``; a call asking ``"left"`` is refused, naming the prompt
  (sentence-transformers would cut the prompt away, and with ``include_prompt=False`` mean-pool the text's
  first rows as if they were the prompt's: a vector of neither).
- An artifact whose tokenizer cuts from the left natively (its ``tokenizer_config.json`` says so): the SDK cuts
  as sentence-transformers does with that model, prompt included, whether the call names the side
  (``"left"``, the record's own) or not; ``"right"`` keeps the prompt, as sentence-transformers does when told
  to cut from the right. Over HTTP, ``truncation_direction`` says the same.

Models: the REAL MiniLM backbone in sentence-transformers' asymmetric layout (E5-style "query: " prompt,
``include_prompt=False``), saved by sentence-transformers; the left-cutting copy differs only in its
``tokenizer_config.json``'s ``truncation_side``."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from helpers import synthetic

LONG = " ".join(f"word{i} alpha beta" for i in range(200))  # far over the model's 128 tokens
ROLE = "query"


def _reference(model_dir, side: str) -> np.ndarray:
    """sentence-transformers' own vector of LONG under the query prompt, its tokenizer cutting from ``side``."""
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(model_dir), device="cpu")
    st.tokenizer.truncation_side = side
    return st.encode([LONG], prompt_name=ROLE, normalize_embeddings=False)


def _prompt_survives(model_dir, side: str) -> bool:
    """Whether sentence-transformers' cut ids still begin with the prompt's own (the oracle for "what is cut")."""
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(model_dir), device="cpu")
    st.tokenizer.truncation_side = side
    prompt = st.tokenizer(st.prompts[ROLE].strip(), add_special_tokens=False)["input_ids"]
    ids = st.tokenizer(st.prompts[ROLE] + LONG, truncation=True, max_length=st.max_seq_length)["input_ids"]
    return ids[1:1 + len(prompt)] == prompt


@pytest.fixture(scope="module")
def left_cutting(tmp_path_factory):
    """(model_dir, artifact) of the role model whose tokenizer cuts from the left natively."""
    from readout_export.build import build

    root = tmp_path_factory.mktemp("left-cutting")
    model = synthetic.make_role_model(root / "right", include_prompt=False)
    left = shutil.copytree(model, root / "model")
    config = left / "tokenizer_config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "truncation_side": "left"}))
    manifest = root / "manifest.json"
    manifest.write_text(json.dumps({"schema": "readout-export/manifest/1", "model": str(left),
                                    "output_dir": str(root / "artifact"), "family": "embedding"}))
    return left, build(manifest).output_dir


def _sdk(engine, side):
    return np.asarray(engine.embed(engine.prepare([LONG], role=ROLE, truncation_side=side)).vectors)


def test_a_right_cutting_artifact_keeps_the_prompt_and_refuses_a_left_cut(shared):
    import readout_sdk
    from readout_sdk.errors import InputRefused

    model, artifact = shared("roles")
    engine = readout_sdk.load(artifact)
    assert engine.abi["input"]["truncation"]["side"] == "right"
    assert _prompt_survives(model, "right") and not _prompt_survives(model, "left")
    for side in (None, "right"):
        np.testing.assert_allclose(_sdk(engine, side), _reference(model, "right"), atol=1e-4)
    with pytest.raises(InputRefused, match="prompt"):
        _sdk(engine, "left")


def test_a_left_cutting_artifact_cuts_as_sentence_transformers_does(left_cutting):
    import readout_sdk

    model, artifact = left_cutting
    engine = readout_sdk.load(artifact)
    assert engine.abi["input"]["truncation"]["side"] == "left"
    assert not _prompt_survives(model, "left")  # the reference itself cuts the prompt away
    want = _reference(model, "left")
    for side in (None, "left"):  # naming the record's own side is no different from naming none
        np.testing.assert_allclose(_sdk(engine, side), want, atol=1e-4)
    np.testing.assert_allclose(_sdk(engine, "right"), _reference(model, "right"), atol=1e-4)


def test_truncation_direction_over_http_is_the_same_cut(left_cutting):
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from readout_sdk.serving.http.options import HttpOptions
    from readout_sdk.serving.http.server import build

    model, artifact = left_cutting
    with TestClient(build([f"left={artifact}"], HttpOptions())) as client:
        replies = {d: client.post("/embed", json={"inputs": LONG, "prompt_name": ROLE, "normalize": True,
                                                  **({"truncation_direction": d} if d else {})})
                   for d in (None, "Left", "Right")}
    for direction, side in ((None, "left"), ("Left", "left"), ("Right", "right")):
        reply = replies[direction]
        assert reply.status_code == 200, (direction, reply.text)
        want = _reference(model, side)
        np.testing.assert_allclose(reply.json(), want / np.linalg.norm(want), atol=1e-4)
