"""Decoder yes/no rerankers (Qwen3-Reranker's kind) as a cross_encoder variant: the example under
examples/reranker_yes_no (a SYNTHETIC seeded tiny Qwen3ForCausalLM, byte-level BPE laid out as Qwen's) built
once; parity passes and has teeth; the SDK's scores, the graph's under left and right padding, and HTTP /rerank
all equal the independent oracle: transformers' AutoModelForCausalLM as saved, on each formatted text alone,
softmax over the no/yes logits at its last position. The oracle writes Qwen3-Reranker's published template
itself, so a wrong default template fails here too."""
from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from helpers.http_server import HttpServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "reranker_yes_no"

# Qwen3-Reranker's model card, verbatim (independent of readout_sdk.pair_template's copy)
PREFIX = ("<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct "
          "provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n")
SUFFIX = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
INSTRUCTION = "Given a web search query, retrieve relevant passages that answer the query"


def formatted(query: str, document: str) -> str:
    return PREFIX + f"<Instruct>: {INSTRUCTION}\n<Query>: {query}\n<Document>: {document}" + SUFFIX


QUERY = "What do cats eat?"
DOCS = ["Cats eat meat.", "The stock market fell sharply on Tuesday after the announcement of new tariffs on steel.",
        "A cat is a small carnivorous mammal; domestic cats are fed meat, fish and dry food twice a day.",
        "Paris", "Rain is expected in the north of the country tomorrow, with snow on the high ground."]
PAIRS = [(QUERY, d) for d in DOCS] + [("Which city is the capital of France?", "Paris is the capital of France."),
                                      ("What is {document}?", "A {query} is a {0} template field.")]  # verbatim


def _prepare():
    spec = importlib.util.spec_from_file_location("reranker_prepare", EXAMPLE / "prepare.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The example's manifest and a model from its prepare.py, built once: (manifest, model dir, artifact)."""
    from readout_export.build import build

    root = tmp_path_factory.mktemp("yes_no")
    shutil.copy(EXAMPLE / "manifest.json", root / "manifest.json")
    model = _prepare().make_model(root / "models" / "yes-no-reranker-tiny")
    return root / "manifest.json", model, build(root / "manifest.json").output_dir


@pytest.fixture(scope="module")
def engine(built):
    import readout_sdk

    with readout_sdk.load(built[2]) as e:
        yield e


def oracle(model_dir: Path, pairs: list[tuple[str, str]]) -> np.ndarray:
    """softmax([logit(no), logit(yes)])[yes] at the last position of each formatted text, run alone."""
    import torch
    import transformers

    tok = transformers.AutoTokenizer.from_pretrained(str(model_dir))
    model = transformers.AutoModelForCausalLM.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    yes, no = tok.convert_tokens_to_ids("yes"), tok.convert_tokens_to_ids("no")
    out = []
    with torch.no_grad():
        for q, d in pairs:
            ids = tok(formatted(q, d), return_tensors="pt")
            logits = model(**ids).logits[0, -1]
            out.append(float(torch.softmax(logits[[no, yes]].double(), -1)[1]))
    return np.array(out)


def test_record_states_the_template_the_tokens_and_the_score(built):
    import transformers

    _, model, art = built
    meta = json.loads((art / "readout.json").read_text())
    record = meta["abi"]
    tok = transformers.AutoTokenizer.from_pretrained(str(model))
    template = record["input"]["template"]
    assert {k: template[k] for k in ("prefix", "suffix", "instruction")} == \
        {"prefix": PREFIX, "suffix": SUFFIX, "instruction": INSTRUCTION}
    assert template["tokens"] == len(tok(formatted("", "")).input_ids)
    assert record["readout"]["yes_no"] == {"yes": {"token": "yes", "token_id": tok.convert_tokens_to_ids("yes")},
                                           "no": {"token": "no", "token_id": tok.convert_tokens_to_ids("no")},
                                           "output": "logit_yes_minus_no"}
    assert record["output"]["labels"] == ["yes"] and record["output"]["score_type"] == "sigmoid"
    assert record["readout"]["head"] == "Qwen3ForCausalLM"
    assert record["readout"]["head_row"] == {"row": "last", "set_by": "next_token"}


def test_graph_carries_two_lm_head_rows_not_the_vocabulary(built):
    """The untied LM head ([vocab, width]) is not in the graph: the only vocabulary-sized initializer left is the
    input embedding table, and one [1, width] row (yes minus no) reads the score."""
    import onnx

    _, model, art = built
    config = json.loads((model / "config.json").read_text())
    vocab, width = config["vocab_size"], config["hidden_size"]
    graph = onnx.load(str(art / "model.onnx-fp32.onnx"))
    shapes = [list(i.dims) for i in graph.graph.initializer]
    assert [s for s in shapes if vocab in s] == [[vocab, width]]  # the embedding table only (the head would be a 2nd)
    assert [1, width] in shapes
    assert [d.dim_value for d in graph.graph.output[0].type.tensor_type.shape.dim][1:] == [1]


def test_parity_passes(built):
    from click.testing import CliRunner

    from readout_export.cli import main

    result = CliRunner().invoke(main, ["parity", str(built[2])])
    assert result.exit_code == 0, result.output[-2000:]
    assert "softmax over [no, yes]" in result.output  # the reference is the causal LM as saved


def test_sdk_and_graph_equal_the_eager_causal_lm_on_a_mixed_length_batch(built, engine):
    """score_pairs (template applied by the SDK) against the oracle; then the graph alone, fed the oracle
    tokenizer's ids of the same formatted texts padded left and right in one batch."""
    import onnxruntime as ort
    import transformers

    _, model, art = built
    want = oracle(model, PAIRS)
    got = engine.score_pairs(PAIRS)
    assert [s.index for s in got] == list(range(len(PAIRS))) and not any(s.truncated for s in got)
    np.testing.assert_allclose([s.score for s in got], want, atol=1e-5, rtol=0)
    assert np.ptp(want) > 1e-3  # the scores differ: equality above is not all-equal by accident

    tok = transformers.AutoTokenizer.from_pretrained(str(model))
    encoded = [tok(formatted(q, d)).input_ids for q, d in PAIRS]
    assert len({len(e) for e in encoded}) > 3  # a mixed-length batch
    session = ort.InferenceSession(str(art / "model.onnx-fp32.onnx"), providers=["CPUExecutionProvider"])
    width = max(map(len, encoded))
    for side in ("left", "right"):
        ids = np.full((len(encoded), width), 7, np.int64)  # any pad id: the mask alone marks padding
        mask = np.zeros_like(ids)
        for i, e in enumerate(encoded):
            cols = slice(width - len(e), width) if side == "left" else slice(0, len(e))
            ids[i, cols], mask[i, cols] = e, 1
        (logit,) = session.run(["logits"], {"input_ids": ids, "attention_mask": mask})
        np.testing.assert_allclose(1 / (1 + np.exp(-logit[:, 0].astype(np.float64))), want, atol=1e-5, rtol=0,
                                   err_msg=side)


def test_only_the_texts_are_truncated_never_the_template(built, engine):
    """A document far over max_length is cut; the encoding keeps the whole prefix and suffix, fills max_length,
    and its score is the oracle's on the text the cut document formats to."""
    import transformers

    _, model, _ = built
    long_doc = " ".join(DOCS * 20)
    (scored,) = engine.score_pairs([(QUERY, long_doc)])
    assert scored.truncated
    fam, ctx = engine.family_spec, engine.context
    (parts,) = fam.encode(ctx, 0, [(QUERY, long_doc)])
    enc = parts[0].encodings[0]
    tok = transformers.AutoTokenizer.from_pretrained(str(model))
    prefix = tok(PREFIX + "<Instruct>: " + INSTRUCTION + "\n<Query>:").input_ids
    suffix = tok(SUFFIX).input_ids
    max_length = engine.abi["input"]["max_length"]
    assert len(enc.ids) <= max_length and len(enc.ids) > max_length - 4  # cut by whole tokens, to the limit
    assert enc.ids[:len(prefix)] == prefix and enc.ids[-len(suffix):] == suffix
    text = tok.decode(enc.ids)
    document = text.split("<Document>: ", 1)[1][:-len(SUFFIX)]
    assert long_doc.startswith(document) and len(document) < len(long_doc)  # the document's head, kept verbatim
    np.testing.assert_allclose(scored.score, oracle(model, [(QUERY, document)])[0], atol=1e-5)


def test_http_rerank_returns_the_sdks_scores_and_order(built, engine):
    import httpx

    want = engine.rerank(QUERY, DOCS)
    with HttpServer([f"reranker={built[2]}"]) as server:
        with httpx.Client(base_url=server.url, timeout=60) as http:
            r = http.post("/models/reranker/rerank", json={"query": QUERY, "texts": DOCS})
        assert server.stop() == 0, server.lines[-5:]
    assert r.status_code == 200, r.text
    got = r.json()
    assert [x["index"] for x in got] == [s.index for s in want]
    np.testing.assert_allclose([x["score"] for x in got], [s.score for s in want], atol=1e-6, rtol=0)


def _manifest(built, tmp_path, **yes_no) -> Path:
    manifest, model, _ = built
    doc = json.loads(manifest.read_text())
    doc.update(model=str(model), output_dir=str(tmp_path / "out"), **yes_no)
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps(doc))
    return path


def test_a_multi_token_answer_is_refused_naming_its_json_path(built, tmp_path):
    import transformers

    from readout_export.build import validate
    from readout_export.errors import ManifestError

    pieces = transformers.AutoTokenizer.from_pretrained(str(built[1])).tokenize("absolutely")
    assert len(pieces) > 1  # the premise: this tokenizer splits the word
    with pytest.raises(ManifestError, match=r"\$\.yes_no\.yes.*'absolutely' is \d+ tokens.*exactly one id"):
        validate(_manifest(built, tmp_path, yes_no={"yes": "absolutely"}))


def test_a_template_longer_than_max_length_is_refused_at_build(built, tmp_path):
    from readout_export.build import validate
    from readout_export.errors import ManifestError

    with pytest.raises(ManifestError, match=r"\$\.yes_no\.template.*the template alone is \d+ tokens"):
        validate(_manifest(built, tmp_path, max_length=64, yes_no={}))
    with pytest.raises(ManifestError, match=r"\$\.yes_no\.template\.body.*\{document\} 0 times"):
        validate(_manifest(built, tmp_path, yes_no={"template": {"body": "{query}"}}))


def test_parity_fails_when_the_graph_reads_the_answers_swapped(built, tmp_path, monkeypatch):
    """The gate has teeth: a graph built with the yes and no rows swapped (the record still stating them right)
    fails parity against the causal LM as saved."""
    import readout_export.graph.loader as loader
    from readout_export.build import build
    from readout_export.reference import check_parity

    original = loader.YesNoCore.__init__

    def swapped(self, model, token_types, yes_id, no_id):
        original(self, model, token_types, no_id, yes_id)

    path = _manifest(built, tmp_path)
    with monkeypatch.context() as m:
        m.setattr(loader.YesNoCore, "__init__", swapped)
        art = build(path).output_dir
    report = check_parity(art, widths=(7,))
    failed = {c.metric for c in report.checks if c.decision == "FAIL"}
    assert {"rank_correlation", "max_abs_error"} <= failed and report.exit_code() == 1


def test_yes_no_is_refused_outside_cross_encoder_and_a_causal_lm_needs_it(built, tmp_path):
    from readout_export.build import validate
    from readout_export.errors import ManifestError

    with pytest.raises(ManifestError, match=r"\$\.yes_no: does not apply to family sequence_classification"):
        validate(_manifest(built, tmp_path, family="sequence_classification", yes_no={}))
    path = _manifest(built, tmp_path)
    doc = json.loads(path.read_text())
    del doc["yes_no"]
    path.write_text(json.dumps(doc))
    with pytest.raises(ManifestError, match=r"\$\.yes_no: config\.json declares Qwen3ForCausalLM, a causal LM"):
        validate(path)


def test_the_sdk_refuses_a_record_that_half_states_a_reranker(built, engine):
    """The template and the answer tokens come together, on a cross_encoder, with the template's token count
    this tokenizer gives: else the artifact is refused naming the record's JSON path."""
    import copy

    from readout_sdk.errors import AbiError
    from readout_sdk.families import Context, get

    record = engine.abi
    for path, edit in ((r"\$\.input\.template", lambda r: r["readout"].pop("yes_no")),
                       (r"\$\.readout\.yes_no", lambda r: r["input"].pop("template")),
                       (r"\$\.output", lambda r: r["output"].update(score_type="logit"))):
        changed = copy.deepcopy(record)
        edit(changed)
        with pytest.raises(AbiError, match=path):
            get("cross_encoder").check_record(changed)
    changed = copy.deepcopy(record) | {"family": "sequence_classification"}
    changed["input"]["pair"] = None
    with pytest.raises(AbiError, match=r"\$\.input\.template: sequence_classification applies no prompt template"):
        get("sequence_classification").check_record(changed)
    changed = copy.deepcopy(record)
    changed["input"]["template"]["tokens"] += 1
    with pytest.raises(AbiError, match=r"\$\.input\.template\.tokens"):
        Context(changed, built[2] / "tokenizer.json")
