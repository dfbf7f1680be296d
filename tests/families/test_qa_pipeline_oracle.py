"""``engine.answer`` over long contexts against transformers 4.x's REAL question-answering pipeline.

The oracle is the pipeline itself (tests/helpers/qa_pipeline_v4.py: transformers 4.x installed from the
package index into a cached folder, run in a subprocess on the SAME saved model folder the artifact was
built from; eager PyTorch there, the ONNX graph here). Skipped, with pip's reason, where it cannot be
installed. Each case runs with the record's ``max_length`` (``max_seq_len``) and stride (``doc_stride``);
contexts of one to five windows and ~1,000 characters; ``max_answer_length`` 30 (the record's), 5 and 1;
``top_k`` 1, 3 and 10; both null policies.

What must agree, per case:

* the windows: every window's input ids;
* ``merge_same_text=True`` (the pipeline's rule: scores of candidates with the same text, ignoring case,
  added up over the windows): the whole answer list, text, start, end and score;
* the default rule (the record's: one span's own ``p_start * p_end``): the best answer is the pipeline's
  best single candidate before it merges (its offsets from its own ``get_indices`` on its own window
  encoding, its score) or its no-answer score where that is higher; every answer is one of the pipeline's
  candidates with the same score; the no-answer score is the pipeline's.

The two rules differ on purpose (the module docstring of readout_sdk/families/extractive_qa.py says why);
that difference is what made the SDK's answer differ from the pipeline's on long contexts.

Scores: ONNX Runtime here, float32 PyTorch there, so scores agree to a relative 2e-5, and two answers
whose scores are that close may swap places (counted, and bounded).

Default run: the session's shared QA artifacts (BERT, max_length 48, stride 12; RoBERTa with the cls null
policy, max_length 128, stride 32). ``-m fuzz``: more strides and window sizes (builds more artifacts).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from helpers.corpus import PAIRS, TEXTS
from helpers.qa_pipeline_v4 import PINS, PipelineUnavailable, install, run_pipeline, run_pipelines

REL = 2e-5
QUESTIONS = ["What is it?", "Who wrote the report and where was it written?", "Which file keeps the label map?"]
# ~1,100 characters of the corpus: several windows at every max_length used here
LONG = " ".join(list(TEXTS) + [c for _, c in PAIRS])
ANSWER_LENGTHS_TOPK = [(None, 1), (None, 3), (5, 3), (1, 1), (None, 10)]


@pytest.fixture(scope="module")
def tf4(request) -> Path:
    """The folder holding transformers 4.x. Whether it imports beside this venv is told by the pipeline's
    own process (its first line, `IMPORTED`), not by a probe process of its own: see `_pipeline`."""
    cache = getattr(request.config, "cache", None)
    try:
        site = install(cache.mkdir("transformers4-qa") if cache is not None else None)
    except RuntimeError as e:
        pytest.skip(f"transformers 4.x (the last release with the QA pipeline) cannot be installed: {e}")
    return site


def _pipeline(run, *args):
    """``run(*args)`` (run_pipeline / run_pipelines); skipped, saying why, where transformers 4.x installed
    but does not import beside this venv (the process stopped before its first case)."""
    try:
        return run(*args)
    except PipelineUnavailable as e:
        pytest.skip(f"transformers 4.x ({' '.join(PINS)}) installed but does not import beside this venv: "
                    f"{e.args[0]}")


def _contexts(engine, question: str) -> list[str]:
    """Prefixes of LONG (cut at a space) that make 1, 2, 3, 4 and 5 windows for ``question``, and LONG."""
    found: dict[int, str] = {}
    cuts = [i for i, ch in enumerate(LONG) if ch == " "] + [len(LONG)]
    for cut in cuts[3::3]:
        n = len(engine.trace([(question, LONG[:cut])])[0].parts)
        if n <= 5 and n not in found:
            found[n] = LONG[:cut]
    return [found[n] for n in sorted(found)] + [LONG]


def _key(a) -> tuple[str, int, int]:
    return (a["answer"], a["start"], a["end"]) if isinstance(a, dict) else (a.text, a.start, a.end)


def _close(x: float, y: float) -> bool:
    return math.isclose(x, y, rel_tol=REL, abs_tol=1e-9)


def _edge_rows(enc) -> tuple[int, int]:
    rows = [i for i, s in enumerate(enc.sequence_ids) if s == 1]
    return rows[0], rows[-1]


def _cases(artifact_dir: Path) -> tuple[list[dict], list[str]]:
    """Every case for the artifact's record (each question x context x (max_answer_len, top_k)) and the
    model's input names, as the pipeline is given them."""
    import readout_sdk

    with readout_sdk.load(artifact_dir) as engine:
        record = engine.abi
        max_length, stride = record["input"]["max_length"], record["input"]["long_inputs"]["stride"]
        has_null = record["output"]["null_policy"] == "cls"
        record_len = record["output"]["max_answer_length"]
        cases = []
        for q in QUESTIONS:
            for c in _contexts(engine, q):
                for m, k in ANSWER_LENGTHS_TOPK:
                    cases.append({"question": q, "context": c, "max_seq_len": max_length, "doc_stride": stride,
                                  "max_answer_len": m or record_len, "top_k": k, "handle_impossible_answer": has_null})
    names = ["input_ids", "token_type_ids", "attention_mask"] if record["input"]["token_type_ids"] else \
        ["input_ids", "attention_mask"]
    return cases, names


def _check_artifact(model_dir: Path, artifact_dir: Path, site: Path, need_edge: bool,
                    given: tuple[list[dict], dict] | None = None) -> dict[str, int]:
    """Every case against the pipeline; ``need_edge``: some compared answer must lie on a window edge (the
    seeded BERT model puts many there; the seeded RoBERTa one none). ``given``: the cases and the pipeline's
    answers to them, when already run (`oracles`: one pipeline process for every default-run artifact)."""
    import readout_sdk
    from readout_sdk.families.extractive_qa import FAMILY

    engine = readout_sdk.load(artifact_dir)
    record = engine.abi
    has_null = record["output"]["null_policy"] == "cls"
    if given is None:
        cases, names = _cases(artifact_dir)
        oracle = _pipeline(run_pipeline, site, model_dir, cases, names)
    else:
        cases, oracle = given
    assert oracle["transformers"].startswith("4."), oracle["transformers"]
    assert len(oracle["results"]) == len(cases)
    stats = {"cases": len(cases), "windows": 0, "ties": 0, "edge": 0, "merged_differs": 0, "multi": 0}
    window_counts = set()
    for case, want in zip(cases, oracle["results"]):
        q, c, m, k = case["question"], case["context"], case["max_answer_len"], case["top_k"]
        where = f"{artifact_dir.name} q={q!r} context={len(c)} chars max_answer_len={m} top_k={k}"
        merged = engine.trace([(q, c)], top_k=k, max_answer_length=m, merge_same_text=True)[0]
        plain = engine.trace([(q, c)], top_k=k, max_answer_length=m)[0]

        # 1. the same windows, row for row
        encs = [p.encodings[0] for p in plain.parts]
        assert [list(e.ids) for e in encs] == want["window_ids"], f"{where}: windows differ"
        assert len(want["windows"]) == len(encs), where
        window_counts.add(len(encs))
        stats["windows"] += len(encs)
        stats["multi"] += len(encs) > 1

        # 2. merge_same_text=True: the pipeline's whole answer list
        got = merged.result
        assert len(got) == len(want["answers"]), f"{where}: {got} vs {want['answers']}"
        for g, w in zip(got, want["answers"]):
            assert _close(g.score, w["score"]), f"{where}: score {g.score} vs {w['score']} ({g} / {w})"
            if _key(g) != _key(w):  # two answers whose scores are within REL may swap places
                assert any(_key(o) == _key(g) and _close(o["score"], g.score) for o in want["answers"]) or \
                    _close(g.score, w["score"]), f"{where}: {g} vs {w}"
                stats["ties"] += 1
            assert g.is_null == (w["answer"] == "" and w["start"] == w["end"] == 0 and has_null), where

        # 3. the default rule against the pipeline's own candidates before it merged them
        pool = [(x, a, b, wi, s, e) for wi, win in enumerate(want["windows"])
                for (s, e, x), (a, b) in zip(win["spans"], win["chars"])]
        pipeline_null = want["windows"][-1]["min_null_so_far"] if has_null else None
        best = max(pool, key=lambda p: p[0])
        first = plain.result[0]
        if pipeline_null is not None and pipeline_null > best[0] * (1 + REL):
            assert first.is_null and _close(first.score, pipeline_null), f"{where}: {first} vs null {pipeline_null}"
        elif pipeline_null is None or best[0] > pipeline_null * (1 + REL):
            assert not first.is_null, f"{where}: {first}"
            assert _close(first.score, best[0]), f"{where}: {first} vs {best}"
            if (first.start, first.end) != (best[1], best[2]):
                assert sum(_close(p[0], best[0]) for p in pool) > 1, f"{where}: {first} vs {best}"
                stats["ties"] += 1
            else:
                assert first.text == c[best[1]:best[2]]
        for a in plain.result:
            if not a.is_null:
                assert any((p[1], p[2]) == (a.start, a.end) and _close(p[0], a.score) for p in pool), \
                    f"{where}: {a} is none of the pipeline's candidates"
        spans, null_score = FAMILY.scored(engine.context, plain.outs, plain.parts, k, m, True)
        assert (null_score is None) == (pipeline_null is None), where
        if null_score is not None:
            assert _close(null_score, pipeline_null), f"{where}: null {null_score} vs {pipeline_null}"
        if _key(merged.result[0]) != _key(plain.result[0]):
            stats["merged_differs"] += 1

        # coverage: pipeline candidates that start or end on a window edge next to another window
        for x, a, b, wi, s, e in pool:
            lo, hi = _edge_rows(encs[wi])
            if (e == hi and wi < len(encs) - 1) or (s == lo and wi > 0):
                stats["edge"] += any((g.start, g.end) == (a, b) for g in merged.result)
    assert {1, 2, 3}.issubset(window_counts), f"window counts covered: {sorted(window_counts)}"
    assert stats["edge"] > 0 or not need_edge, f"no compared answer lies on a window edge: {stats}"
    assert stats["ties"] <= max(2, len(cases) // 50), f"too many near-tie swaps: {stats}"
    return stats


DEFAULT_KEYS = ["qa", "qa-null"]


@pytest.fixture(scope="module")
def oracles(shared, tf4) -> dict[str, tuple[list[dict], dict]]:
    """key -> (cases, the pipeline's answers) for the default run's artifacts, from ONE pipeline process
    (each model its own pipeline there): its start costs more than all of its cases."""
    made = {key: _cases(shared(key)[1]) for key in DEFAULT_KEYS}
    answers = _pipeline(run_pipelines, tf4, [(shared(key)[0], *made[key]) for key in DEFAULT_KEYS])
    return {key: (made[key][0], answer) for key, answer in zip(DEFAULT_KEYS, answers)}


@pytest.mark.heavy  # installs transformers 4.x with pip (the oracle) before its first case
@pytest.mark.parametrize("key", DEFAULT_KEYS)
def test_answers_match_the_transformers_4_pipeline(shared, tf4, oracles, key):
    model_dir, artifact_dir = shared(key)
    stats = _check_artifact(model_dir, artifact_dir, tf4, need_edge=key == "qa", given=oracles[key])
    print(key, json.dumps(stats))


@pytest.mark.fuzz
@pytest.mark.parametrize("model_key,max_length,stride", [("qa", 40, 4), ("qa", 64, 20), ("qa", 48, 0),
                                                         ("qa-null", 96, 40)])
def test_answers_match_the_pipeline_across_strides(shared, tf4, tmp_path, model_key, max_length, stride):
    from readout_export.build import build

    source_model, source_artifact = shared(model_key)
    import readout_sdk

    with readout_sdk.load(source_artifact) as source:
        null = source.abi["output"]["null_policy"]
    doc = {"schema": "readout-export/manifest/1", "model": str(source_model),
           "output_dir": str(tmp_path / f"qa-{max_length}-{stride}"), "family": "extractive_qa",
           "max_length": max_length, "stride": stride, "null_policy": null}
    (tmp_path / "manifest.json").write_text(json.dumps(doc))
    artifact = build(tmp_path / "manifest.json").output_dir
    stats = _check_artifact(source_model, artifact, tf4, need_edge=model_key == "qa")
    print(model_key, max_length, stride, json.dumps(stats))
