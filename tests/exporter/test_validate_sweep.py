"""`validate` agrees with `build` on generated manifests and model directories (issue 35, point 5).

Each case mutates a valid manifest and/or a copy of a tiny model directory (config.json fields, the weights,
the tokenizer, modules.json and its modules, config_sentence_transformers.json, labels, family, max_length,
targets...), seeded. Both commands run in-process (click's runner) and must agree:

- both refuse: exit 2, every stderr line ``error: $...`` (validate may list several; build stops at the first,
  which is one of validate's), or
- validate accepts and build builds (exit 0);

and never ``unexpected failure`` or a traceback. In the CI-sized run (``-m heavy``), a build that validate accepted
goes as far as the ONNX export (weights loaded by transformers, the eager graph run, the record made and
checked) and stops there, except the first ``FULL_BUILDS`` of them; ``pytest -m fuzz`` builds every accepted
case to the end with a larger budget. The table (`table`) is printed with ``-s`` and attached to a failure.

Models: SYNTHETIC tiny BERTs (tests/helpers/synthetic.py), seeded.
"""
from __future__ import annotations

import json
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest
from click.testing import CliRunner

from helpers import synthetic
from readout_export.cli import main

SEED = 35
BUDGET = 30  # generated cases in the CI-sized run (about 50 s on 2 busy cores; the suite has a budget)
FULL_BUILDS = 1  # accepted cases built to the end in the CI-sized run (the rest stop at the export)
FUZZ_BUDGET = 400  # pytest -m fuzz: every accepted case built to the end
LABELS = ["negative", "neutral", "positive"]


# ---- the base models and manifests the mutations start from -------------------------------------
@pytest.fixture(scope="module")
def bases(tmp_path_factory) -> dict[str, tuple[Path, dict[str, Any]]]:
    return make_bases(tmp_path_factory.mktemp("sweep-bases"))


def make_bases(root: Path) -> dict[str, tuple[Path, dict[str, Any]]]:
    """Valid tiny models (and the manifest fields each needs): classifier, tagger, QA, MLM, ST embedding."""
    out = {}
    for key, family, labels in (("cls", "sequence_classification", LABELS), ("tok", "token_classification", LABELS),
                                ("qa", "extractive_qa", None), ("mlm", "sparse", None)):
        model = synthetic.make_model("bert", family, root / key, labels=labels, seed=3)
        out[key] = (model, {"family": family})
    st = synthetic.make_model("bert", "embedding", root / "st", seed=3)
    (st / "1_Pooling").mkdir()
    (st / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": 32,
                                                               "pooling_mode_mean_tokens": True}))
    (st / "2_Normalize").mkdir()
    (st / "modules.json").write_text(json.dumps(MODULES))
    (st / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128}))
    (st / "config_sentence_transformers.json").write_text(json.dumps(
        {"prompts": {"query": "", "document": ""}, "default_prompt_name": None, "similarity_fn_name": "cosine"}))
    out["st"] = (st, {"family": "embedding"})
    return out


MODULES = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
           {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
           {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}]


@dataclass
class Case:
    """One generated case: a base, the mutations applied (their labels), the manifest and model directory."""

    base: str
    labels: list[str] = field(default_factory=list)


# ---- mutations: each edits the manifest `doc` and/or the model copy `model` -----------------------
HOSTILE = [0, -1, 1, 2, 3, 7, 31, 33, 64, 129, 1 << 31, 10 ** 30, 0.5, "x", None, True, [], {}]
CONFIG_KEYS = ["hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size", "vocab_size",
               "max_position_embeddings", "type_vocab_size", "num_labels", "pad_token_id", "layer_norm_eps",
               "hidden_act", "model_type", "architectures", "id2label", "problem_type"]


def _json(path: Path) -> Any:
    return json.loads(path.read_text())


def _put(path: Path, value: Any) -> None:
    if path.is_symlink():
        path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(value if isinstance(value, str) else json.dumps(value))


def m_config(rng: random.Random, doc: dict, model: Path) -> str:
    config = _json(model / "config.json")
    key = rng.choice(CONFIG_KEYS)
    if rng.random() < 0.15:
        config.pop(key, None)
        _put(model / "config.json", config)
        return f"config.json: drop {key}"
    special = {"model_type": ["roberta", "distilbert", "nonesuch", 3], "hidden_act": ["relu", "nonesuch", 1],
               "architectures": [["BertForSequenceClassification"], ["BertForTokenClassification"],
                                 ["BertForQuestionAnswering"], ["BertModel"], ["BertForMaskedLM"], "BertModel", [1]],
               "id2label": [{"0": "a", "1": "a", "2": "b"}, {"0": "a"}, {"0": "a", "2": "b"}, {"x": "a"},
                            {str(i): f"L{i}" for i in range(4)}, ["a"]],
               "problem_type": ["regression", "multi_label_classification", "single_label_classification", "x"]}
    value = rng.choice(special.get(key, HOSTILE))
    config[key] = value
    _put(model / "config.json", config)
    return f"config.json: {key}={str(value)[:30]}"


def _tensors(model: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(model / "model.safetensors"))


def _save(model: Path, tensors: dict) -> None:
    from safetensors.torch import save_file

    (model / "model.safetensors").unlink()
    save_file(tensors, str(model / "model.safetensors"))


def m_weights(rng: random.Random, doc: dict, model: Path) -> str:
    import torch

    kind = rng.choice(["truncate", "garbage", "garbage_bin", "bin", "drop_head", "drop_one", "resize", "rename",
                       "empty"])
    path = model / "model.safetensors"
    if kind == "truncate":
        data = path.read_bytes()
        path.unlink()
        path.write_bytes(data[: rng.randrange(1, len(data))])
    elif kind == "garbage":
        path.unlink()
        path.write_bytes(bytes(rng.randrange(256) for _ in range(rng.choice([0, 7, 64, 4096]))))
    elif kind in ("garbage_bin", "bin"):
        tensors = _tensors(model)
        path.unlink()
        if kind == "bin":
            torch.save(tensors, str(model / "pytorch_model.bin"))
        else:
            (model / "pytorch_model.bin").write_bytes(b"PK\x03\x04" + b"garbage" * rng.randrange(1, 50))
    elif kind == "empty":
        _save(model, {})
    else:
        tensors = _tensors(model)
        names = sorted(tensors)
        if kind == "drop_head":
            tensors = {k: v for k, v in tensors.items() if k.startswith("bert.")}
        elif kind == "drop_one":
            tensors.pop(rng.choice(names))
        elif kind == "resize":
            name = rng.choice(names)
            tensors[name] = torch.zeros([max(1, d + rng.choice([-1, 1])) for d in tensors[name].shape])
        else:
            name = rng.choice(names)
            tensors["x." + name] = tensors.pop(name)
        _save(model, tensors)
    return f"weights: {kind}"


def m_tokenizer(rng: random.Random, doc: dict, model: Path) -> str:
    kind = rng.choice(["no_unk", "bad_json", "drop", "added_beyond", "max_len", "side", "no_pad", "unk_name",
                       "post_processor"])
    tok = _json(model / "tokenizer.json")
    cfg = _json(model / "tokenizer_config.json")
    if kind == "no_unk":
        tok["model"]["vocab"].pop("[UNK]", None)
    elif kind == "bad_json":
        _put(model / "tokenizer.json", "{ nope")
        return "tokenizer: not JSON"
    elif kind == "drop":
        (model / "tokenizer.json").unlink()
        return "tokenizer: tokenizer.json removed"
    elif kind == "added_beyond":
        big = rng.choice([30522, 40000, 1 << 31, 1 << 40])
        tok["added_tokens"].append({"id": big, "content": "[NEW]", "single_word": False, "lstrip": False,
                                    "rstrip": False, "normalized": False, "special": True})
        tok["model"]["vocab"]["[NEW]"] = big
    elif kind == "max_len":
        cfg["model_max_length"] = rng.choice([0, 1, 2, 4, 8, 64, -3, "x"])
    elif kind == "side":
        cfg["truncation_side"] = rng.choice(["left", "middle", 3])
    elif kind == "no_pad":
        cfg.pop("pad_token", None)
        tok["added_tokens"] = [t for t in tok["added_tokens"] if t["content"] != "[PAD]"]
    elif kind == "unk_name":
        tok["model"]["unk_token"] = rng.choice(["[NOPE]", "", None])
    else:
        tok["post_processor"] = rng.choice([None, {"type": "TemplateProcessing", "single": [], "pair": [],
                                                   "special_tokens": {}}])
    _put(model / "tokenizer.json", tok)
    _put(model / "tokenizer_config.json", cfg)
    return f"tokenizer: {kind}"


def m_modules(rng: random.Random, doc: dict, model: Path) -> str:
    if not (model / "modules.json").is_file():
        return m_config(rng, doc, model)
    kind = rng.choice(["pooling_twice", "normalize_first", "width", "mode", "dense_bad", "dense_ok", "not_list",
                       "no_pool_config", "prompt_missing", "prompts_bad", "similarity", "transformer_twice",
                       "no_transformer"])
    modules = [dict(m) for m in MODULES]
    if kind == "pooling_twice":
        modules.insert(2, dict(modules[1], idx=2))
    elif kind == "normalize_first":
        modules = [modules[0], modules[2], modules[1]]
    elif kind == "transformer_twice":
        modules.insert(1, dict(modules[0]))
    elif kind == "no_transformer":
        modules = modules[1:]
    elif kind == "width":
        _put(model / "1_Pooling" / "config.json", {"word_embedding_dimension": rng.choice([16, 64, 384, "x"]),
                                                   "pooling_mode_mean_tokens": True})
    elif kind == "mode":
        _put(model / "1_Pooling" / "config.json", {"word_embedding_dimension": 32,
                                                   "pooling_mode": rng.choice(["cls", "max", "median", ["mean", "max"],
                                                                               "lasttoken", 3])})
    elif kind in ("dense_bad", "dense_ok"):
        import torch
        from safetensors.torch import save_file

        out_features = 8
        in_features = 32 if kind == "dense_ok" else rng.choice([16, 64])
        (model / "3_Dense").mkdir()
        save_file({"linear.weight": torch.randn(out_features, 32) * 0.1},
                  str(model / "3_Dense" / "model.safetensors"))
        _put(model / "3_Dense" / "config.json", {"in_features": in_features, "out_features": out_features,
                                                 "bias": False,
                                                 "activation_function": "torch.nn.modules.linear.Identity"})
        modules.insert(2, {"idx": 2, "name": "2", "path": "3_Dense", "type": "sentence_transformers.models.Dense"})
    elif kind == "not_list":
        _put(model / "modules.json", {"0": MODULES[0]})
        return "modules.json: an object"
    elif kind == "no_pool_config":
        (model / "1_Pooling" / "config.json").unlink()
    elif kind in ("prompt_missing", "prompts_bad", "similarity"):
        st = _json(model / "config_sentence_transformers.json")
        if kind == "prompt_missing":
            st["default_prompt_name"] = rng.choice(["query", "passage", "", 3])
            st["prompts"] = rng.choice([{"query": "q: "}, {}, None])
        elif kind == "prompts_bad":
            st["prompts"] = rng.choice([["q"], {"query": 3}, {"": "x"}, "q"])
        else:
            st["similarity_fn_name"] = rng.choice(["dot", "euclidean", "manhattan", 3])
        _put(model / "config_sentence_transformers.json", st)
    _put(model / "modules.json", modules)
    return f"modules: {kind}"


FAMILIES = ["embedding", "sequence_classification", "multilabel_classification", "regression", "cross_encoder",
            "token_classification", "extractive_qa", "multiple_choice", "sparse", "late_interaction"]


def m_manifest(rng: random.Random, doc: dict, model: Path) -> str:
    kind = rng.choice(["family", "labels", "max_length", "max_length", "side", "targets", "score_type", "stride",
                       "pooling", "thresholds"])
    if kind == "family":
        doc["family"] = rng.choice(FAMILIES)
        for key in ("labels", "readout", "score_type", "thresholds", "stride"):
            doc.pop(key, None)
        if doc["family"] == "cross_encoder":
            doc["score_type"] = rng.choice(["sigmoid", "softmax", "logit"])
    elif kind == "labels":
        doc["labels"] = rng.choice([["a", "b", "a"], ["a", "b"], list(reversed(LABELS)), LABELS, ["x", "y", "z"],
                                    ["a", "b", "c", "d"]])
    elif kind == "max_length":
        doc["max_length"] = rng.choice([1, 2, 3, 4, 5, 8, 9, 10, 16, 64, 127, 128, 129, 512, 10 ** 6])
    elif kind == "side":
        doc["truncation"] = {"side": rng.choice(["left", "right"])}
    elif kind == "targets":
        doc["targets"] = [rng.choice([{"format": "onnx", "precision": "fp32"}, {"format": "onnx", "precision": "fp16"},
                                      {"format": "onnx", "precision": "int8"},
                                      {"format": "tensorrt", "precision": "fp16"},
                                      {"format": "onnx", "precision": "fp32", "runtime": "openvino"}])]
    elif kind == "score_type":
        doc["score_type"] = rng.choice(["cosine", "dot", "sigmoid", "softmax", "logit", "euclidean"])
    elif kind == "stride":
        doc["stride"] = rng.choice([0, 1, 8, 32, 64, 200])
    elif kind == "pooling":
        doc["readout"] = {"pooling": rng.choice(["mean", "cls", "max", ["mean", "max"], "last_token", "first_valid"])}
    else:
        doc["thresholds"] = rng.choice([0.5, [0.2, 0.3, 0.4], 1.5, [0.5]])
    return f"manifest: {kind}={json.dumps({k: doc.get(k) for k in ('family', 'labels', 'max_length', 'truncation', 'targets', 'score_type', 'stride', 'readout', 'thresholds') if k in doc})[:120]}"


MUTATIONS: list[Callable[[random.Random, dict, Path], str]] = [m_config, m_config, m_weights, m_tokenizer, m_modules,
                                                              m_manifest, m_manifest]


def generate(rng: random.Random, bases: dict, where: Path) -> tuple[Case, Path]:
    """One case under ``where``: a copy of a base model (weights linked until a mutation rewrites them), its
    manifest, 1 or 2 mutations."""
    key = rng.choice(sorted(bases))
    src, extra = bases[key]
    model = where / "model"
    shutil.copytree(src, model, ignore=shutil.ignore_patterns("*.safetensors"))
    for w in src.glob("*.safetensors"):
        shutil.copy(w, model / w.name)
    doc = {"schema": "readout-export/manifest/1", "model": str(model), "output_dir": str(where / "out"), **extra}
    case = Case(key)
    for _ in range(rng.choice([1, 1, 2])):
        case.labels.append(rng.choice(MUTATIONS)(rng, doc, model))
    (where / "manifest.json").write_text(json.dumps(doc))
    return case, where / "manifest.json"


# ---- running a case -------------------------------------------------------------------------------
@dataclass
class Outcome:
    case: Case
    kind: str  # "refused", "built", "disagree", "unexpected"
    detail: str = ""


def _lines(result) -> list[str]:
    return [line for line in result.stderr.strip().splitlines() if line.strip()]


def _refusal(result) -> bool:
    lines = _lines(result)
    return result.exit_code == 2 and bool(lines) and all(line.startswith("error: $") for line in lines)


def run_case(case: Case, manifest: Path, full: bool, monkeypatch) -> Outcome:
    runner = CliRunner()
    checked = runner.invoke(main, ["validate", str(manifest)])
    with monkeypatch.context() as m:
        if not full:
            import readout_export.graph.onnx_export as onnx_export

            def stop(*args, **kwargs):
                raise SystemExit(0)  # after the weights, the eager graph and the record: what export starts from

            m.setattr(onnx_export, "export_onnx", stop)
        built = runner.invoke(main, ["build", "-q", str(manifest)])
    text = checked.output + built.output
    label = f"{case.base}: {'; '.join(case.labels)}"
    if "unexpected failure" in text or "Traceback" in text or built.exit_code not in (0, 2) or \
            checked.exit_code not in (0, 2):
        return Outcome(case, "unexpected", f"{label}\n    validate {checked.exit_code}: {_lines(checked)[:2]}\n"
                                           f"    build {built.exit_code}: {_lines(built)[-2:]}")
    if checked.exit_code == 0 and built.exit_code == 0:
        return Outcome(case, "built", label)
    if _refusal(checked) and _refusal(built) and len(_lines(built)) == 1 and _lines(built)[0] in _lines(checked):
        return Outcome(case, "refused", label)
    return Outcome(case, "disagree", f"{label}\n    validate {checked.exit_code}: {_lines(checked)[:2]}\n"
                                     f"    build {built.exit_code}: {_lines(built)[-2:]}")


def sweep(bases: dict, root: Path, budget: int, seed: int, full_builds: int, monkeypatch) -> list[Outcome]:
    rng = random.Random(seed)
    outcomes: list[Outcome] = []
    built = 0
    for i in range(budget):
        where = root / f"case{i:04d}"
        where.mkdir()
        case, manifest = generate(rng, bases, where)
        accepted = CliRunner().invoke(main, ["validate", str(manifest)]).exit_code == 0
        full = accepted and built < full_builds
        outcomes.append(run_case(case, manifest, full, monkeypatch))
        built += full
        shutil.rmtree(where, ignore_errors=True)
    return outcomes


def table(outcomes: list[Outcome], full_builds: int | str) -> str:
    """The sweep's table, ready to paste in a report."""
    count = {k: sum(o.kind == k for o in outcomes) for k in ("refused", "built", "disagree", "unexpected")}
    rows = [("cases", len(outcomes)), ("agreed", count["refused"] + count["built"]),
            ("refused by both (exit 2, one line)", count["refused"]),
            (f"built by both (full builds: {full_builds}; the rest to the export)", count["built"]),
            ("disagreements", count["disagree"]), ("unexpected failures or tracebacks", count["unexpected"])]
    text = "| outcome | cases |\n|---|---|\n" + "\n".join(f"| {k} | {v} |" for k, v in rows)
    bad = [o for o in outcomes if o.kind in ("disagree", "unexpected")]
    return text + "".join(f"\n- {o.kind}: {o.detail}" for o in bad[:20])


def check(outcomes: list[Outcome], full_builds: int | str) -> None:
    text = table(outcomes, full_builds)
    print("\n" + text)
    assert not [o for o in outcomes if o.kind in ("disagree", "unexpected")], text
    assert any(o.kind == "built" for o in outcomes) and any(o.kind == "refused" for o in outcomes), text


@pytest.mark.heavy
def test_validate_agrees_with_build(bases, tmp_path, monkeypatch):
    check(sweep(bases, tmp_path, BUDGET, SEED, FULL_BUILDS, monkeypatch), FULL_BUILDS)


@pytest.mark.fuzz
def test_validate_agrees_with_build_fuzz(bases, tmp_path, monkeypatch):
    check(sweep(bases, tmp_path, FUZZ_BUDGET, SEED + 1, FUZZ_BUDGET, monkeypatch), "all")
