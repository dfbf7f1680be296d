"""Bad manifests and model directories: each is one line naming the JSON path and what was
expected, exit code 2, and nothing written. Models: all-MiniLM-L6-v2 (REAL) and a SYNTHETIC tiny
BERT classifier."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from helpers import synthetic
from readout_export.cli import main

SENTIMENT = ["negative", "neutral", "positive"]


@pytest.fixture(scope="module")
def classifier(tmp_path_factory) -> Path:
    return synthetic.make_model("bert", "sequence_classification", tmp_path_factory.mktemp("cls") / "model",
                                labels=SENTIMENT)


@pytest.fixture(scope="module")
def minilm() -> Path:
    return synthetic.minilm_path()


def run(tmp_path: Path, manifest: dict, command: str = "validate", raw: str | None = None):
    path = tmp_path / "manifest.json"
    path.write_text(raw if raw is not None else json.dumps(manifest))
    result = CliRunner().invoke(main, [command, str(path)])
    return result


def expect_error(tmp_path: Path, manifest: dict, path: str, words: str, command: str = "validate", raw=None):
    result = run(tmp_path, manifest, command, raw)
    message = result.stderr.strip()
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert message.count("\n") == 0, f"expected one line, got: {message!r}"
    assert message.startswith(f"error: {path}:"), message
    assert words in message, message
    assert "Traceback" not in result.output
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "manifest.json"]
    assert leftovers == [], f"something was written: {leftovers}"
    return message


def base(model: Path, **kw) -> dict:
    return {"schema": "readout-export/manifest/1", "model": str(model), "family": "embedding",
            "output_dir": "out", **kw}


def test_missing_field(tmp_path, minilm):
    doc = base(minilm)
    del doc["family"]
    expect_error(tmp_path, doc, "$.family", "required field is missing")


def test_unknown_field(tmp_path, minilm):
    expect_error(tmp_path, base(minilm, colour="blue"), "$.colour", "unknown field")


def test_unknown_readout_field(tmp_path, minilm):
    expect_error(tmp_path, base(minilm, readout={"pooling": "mean", "temperature": 2}), "$.readout.temperature",
                 "unknown field")


def test_wrong_type(tmp_path, minilm):
    expect_error(tmp_path, base(minilm, max_length="256"), "$.max_length", "expected integer")


def test_wrong_schema_version(tmp_path, minilm):
    expect_error(tmp_path, base(minilm, schema="readout-export/manifest/9"), "$.schema", "readout-export/manifest/1")


def test_not_json(tmp_path, minilm):
    expect_error(tmp_path, {}, "$", "not valid JSON", raw="{ nope")


def test_unknown_family(tmp_path, minilm):
    expect_error(tmp_path, base(minilm, family="poem"), "$.family", "expected one of")


def test_unknown_pooling_mode(tmp_path, minilm):
    expect_error(tmp_path, base(minilm, readout={"pooling": "median"}), "$.readout.pooling", "pooling mode")


def test_pooling_the_family_cannot_take(tmp_path, classifier):
    doc = base(classifier, family="sequence_classification", readout={"pooling": "mean"})
    expect_error(tmp_path, doc, "$.readout", "does not apply to family sequence_classification")


def test_sparse_takes_only_max(tmp_path, tmp_path_factory):
    mlm = synthetic.make_model("bert", "sparse", tmp_path_factory.mktemp("mlm") / "m")
    expect_error(tmp_path, base(mlm, family="sparse", readout={"pooling": "mean"}), "$.readout.pooling",
                 "max over rows")


def test_field_of_another_family(tmp_path, minilm):
    expect_error(tmp_path, base(minilm, thresholds=0.5), "$.thresholds", "does not apply to family embedding")


def test_model_dir_missing(tmp_path):
    expect_error(tmp_path, base(tmp_path / "nowhere"), "$.model", "model directory not found")


def test_model_dir_without_weights(tmp_path, tmp_path_factory, minilm):
    src = tmp_path_factory.mktemp("noweights")
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(minilm / name, src / name)
    expect_error(tmp_path, base(src, readout={"pooling": "mean"}), "$.model", "no weights")


def test_model_dir_without_tokenizer(tmp_path, tmp_path_factory, minilm):
    src = tmp_path_factory.mktemp("notok")
    for name in ("config.json", "model.safetensors"):
        (src / name).symlink_to(minilm / name)
    expect_error(tmp_path, base(src, readout={"pooling": "mean"}), "$.model", "no tokenizer")


def test_labels_do_not_match_head_width(tmp_path, classifier):
    doc = base(classifier, family="sequence_classification", labels=["bad", "good"])
    expect_error(tmp_path, doc, "$.labels", "2 labels but the head has 3 outputs")


def test_labels_repeat(tmp_path, classifier):
    doc = base(classifier, family="sequence_classification", labels=["a", "b", "a"])
    expect_error(tmp_path, doc, "$.labels", "labels repeat")


def test_label_order_disagrees_with_config(tmp_path, classifier):
    doc = base(classifier, family="sequence_classification", labels=["positive", "neutral", "negative"])
    msg = expect_error(tmp_path, doc, "$.labels", "config.json id2label declares")
    assert "['positive', 'neutral', 'negative']" in msg and "['negative', 'neutral', 'positive']" in msg


def test_problem_type_disagrees(tmp_path, tmp_path_factory, classifier):
    src = tmp_path_factory.mktemp("ptype")
    for p in classifier.iterdir():
        (src / p.name).symlink_to(p)
    config = json.loads((classifier / "config.json").read_text())
    (src / "config.json").unlink()
    (src / "config.json").write_text(json.dumps({**config, "problem_type": "single_label_classification"}))
    expect_error(tmp_path, base(src, family="regression"), "$.family",
                 "needs problem_type 'regression', but config.json declares 'single_label_classification'")


def test_serving_floor_names_a_metric_the_family_measures(tmp_path, minilm, classifier):
    expect_error(tmp_path, base(minilm, serving={"min_parity": {"min_cosin": 0.99}}),
                 "$.serving.min_parity.min_cosin", "embedding measures ['min_cosine'")
    expect_error(tmp_path, base(classifier, family="sequence_classification",
                                serving={"min_parity": {"min_cosine": 0.99}}),
                 "$.serving.min_parity.min_cosine", "sequence_classification measures ['argmax_agreement'")
    expect_error(tmp_path, base(minilm, serving={"min_parity": {}}), "$.serving.min_parity", "")


def test_thresholds_count(tmp_path, classifier):
    doc = base(classifier, family="multilabel_classification", thresholds=[0.5, 0.5])
    expect_error(tmp_path, doc, "$.thresholds", "2 thresholds for 3 labels")


def test_max_length_disagrees_with_sentence_transformers(tmp_path, minilm):
    expect_error(tmp_path, base(minilm, max_length=1000), "$.max_length",
                 "manifest says 1000 but the sentence-transformers config (max_seq_length) declares 256")


def test_max_length_beyond_table_without_st_config(tmp_path, classifier):
    doc = base(classifier, family="sequence_classification", max_length=129)
    expect_error(tmp_path, doc, "$.max_length", "exceeds the model's position table (128 positions)")


def test_output_dir_inside_model_dir(tmp_path, classifier):
    doc = base(classifier, family="sequence_classification", output_dir=str(classifier / "dist"))
    expect_error(tmp_path, doc, "$.output_dir", "inside the model directory")


def test_disagreement_with_sentence_transformers_pooling(tmp_path, minilm):
    msg = expect_error(tmp_path, base(minilm, readout={"pooling": "cls"}), "$.readout.pooling",
                       "1_Pooling/config.json declares")
    assert "['cls']" in msg and "['mean']" in msg


def test_disagreement_with_normalize_module(tmp_path, minilm):
    expect_error(tmp_path, base(minilm, readout={"normalize": "none"}), "$.readout.normalize",
                 "manifest says 'none' but modules.json declares 'l2'")


def test_embedding_without_declared_pooling(tmp_path, classifier):
    expect_error(tmp_path, base(classifier), "$.readout.pooling", "declares no pooling")


def test_cross_encoder_needs_score_type(tmp_path, classifier):
    expect_error(tmp_path, base(classifier, family="cross_encoder"), "$.score_type", "logit, sigmoid or softmax")


def test_unsupported_target_is_refused(tmp_path, minilm):
    doc = base(minilm, targets=[{"format": "onnx", "precision": "fp16", "runtime": "openvino"}])
    expect_error(tmp_path, doc, "$.targets[0]", "not built by this release")


@pytest.mark.parametrize("target, path, words", [
    ({"format": "tensorrt", "precision": "fp16", "profile": {"sequence": [1, 128, 512]}},
     "$.targets[0].profile.sequence", "max 512 exceeds max_length 256"),
    ({"format": "tensorrt", "precision": "fp16", "profile": {"batch": [8, 4, 16]}},
     "$.targets[0].profile.batch", "1 <= min <= opt <= max"),
    ({"format": "onnx", "precision": "fp16", "profile": {"batch": [1, 4, 16]}}, "$.targets[0].profile",
     "tensorrt targets only"),
    ({"format": "tensorrt", "precision": "int8", "isa": "avx2"}, "$.targets[0].isa", "onnx int8 targets only"),
])
def test_tensorrt_target_errors(tmp_path, minilm, target, path, words):
    expect_error(tmp_path, base(minilm, max_length=256, targets=[target]), path, words)


def test_tensorrt_target_brings_its_onnx_source(tmp_path, minilm):
    doc = base(minilm, targets=[{"format": "tensorrt", "precision": "fp16"}])
    (tmp_path / "manifest.json").write_text(json.dumps(doc))
    result = CliRunner().invoke(main, ["validate", "--json", str(tmp_path / "manifest.json")])
    assert result.exit_code == 0, result.output
    targets = json.loads(result.stdout)["targets"]
    assert [(t["format"], t["precision"]) for t in targets] == [("tensorrt", "fp16"), ("onnx", "fp16"), ("onnx", "fp32")]
    assert targets[0]["profile"] == {"batch": [1, 32, 128], "sequence": [1, 128, 256]}


def test_errors_also_stop_build(tmp_path, classifier):
    doc = base(classifier, family="sequence_classification", labels=["bad", "good"])
    expect_error(tmp_path, doc, "$.labels", "head has 3 outputs", command="build")


def test_validate_accepts_the_example(tmp_path, minilm):
    result = run(tmp_path, base(minilm, max_length=256, readout={"pooling": "mean", "normalize": "l2"}))
    assert result.exit_code == 0, result.output
    assert "valid embedding manifest" in result.output
    assert list(tmp_path.iterdir()) == [tmp_path / "manifest.json"]


def test_truncation_side_disagrees_with_tokenizer(tmp_path, classifier):
    doc = base(classifier, family="sequence_classification", truncation={"side": "left"})
    expect_error(tmp_path, doc, "$.truncation.side", "tokenizer_config.json (truncation_side) declares 'right'")


def test_cls_needs_a_leading_special_token(tmp_path, tmp_path_factory):
    qwen = synthetic.make_model("qwen2", "embedding", tmp_path_factory.mktemp("qwen") / "m")
    expect_error(tmp_path, base(qwen, readout={"pooling": "cls"}), "$.readout.pooling", "puts none there")


def test_pickled_projection_loads_only_as_tensors(tmp_path, tmp_path_factory):
    """The exporter's own .bin path (a Dense projection) refuses a pickle that would run code."""
    import torch

    root = synthetic.make_model("bert", "embedding", tmp_path_factory.mktemp("dense") / "m")
    marker = tmp_path_factory.mktemp("marker") / "pwned"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    (root / "1_Dense").mkdir()
    torch.save({"linear.weight": Payload()}, str(root / "1_Dense" / "pytorch_model.bin"))
    (root / "1_Dense" / "config.json").write_text(json.dumps({"in_features": 32, "out_features": 8, "bias": False}))
    (root / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "1_Dense", "type": "sentence_transformers.models.Dense"}]))
    (root / "1_Pooling").mkdir()
    (root / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode": "mean"}))
    for command in ("validate", "build"):  # refused before anything is built: exit 2, one line naming the file
        expect_error(tmp_path, base(root), "$.model", "1_Dense/pytorch_model.bin: not a PyTorch state dict that "
                                                      "loads with weights_only=True", command=command)
    assert not marker.exists(), "the pickle ran code while loading weights"


def test_pickled_weights_load_only_as_tensors(tmp_path, tmp_path_factory):
    """A pytorch_model.bin whose pickle would run code is refused (weights_only=True), and the code never runs."""
    import torch

    src = synthetic.make_model("bert", "sequence_classification", tmp_path_factory.mktemp("pickle") / "m",
                               labels=SENTIMENT)
    marker = tmp_path_factory.mktemp("marker") / "pwned"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    (src / "model.safetensors").unlink()
    torch.save({"payload": Payload()}, str(src / "pytorch_model.bin"))
    for command in ("validate", "build"):
        expect_error(tmp_path, base(src, family="sequence_classification"), "$.model",
                     "pytorch_model.bin: not a PyTorch state dict that loads with weights_only=True", command=command)
    assert not marker.exists(), "the pickle ran code while loading weights"


# ---- hostile manifests and destinations (issue 15): each was exit 1 with an exception name before ----
def expect_refused(tmp_path: Path, raw: bytes, path: str, words: str, command: str = "validate") -> str:
    (tmp_path / "manifest.json").write_bytes(raw)
    result = CliRunner().invoke(main, [command, str(tmp_path / "manifest.json")])
    message = result.stderr.strip()
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert message.count("\n") == 0 and message.startswith(f"error: {path}"), message
    assert words in message, message
    assert not any(name in message for name in ("Error:", "Exception", "Traceback")), message
    return message


def test_manifest_bytes_that_are_not_utf8(tmp_path, minilm):
    raw = json.dumps(base(minilm, name="caf\u00e9"), ensure_ascii=False).encode("utf-8").replace(b"\xc3\xa9", b"\xe9")
    expect_refused(tmp_path, raw, "$", "not UTF-8 text")


def test_manifest_nested_2000_deep(tmp_path, minilm):
    doc = json.dumps(base(minilm))[:-1] + ', "serving": ' + "[" * 2000 + "]" * 2000 + "}"
    expect_refused(tmp_path, doc.encode(), "$", "nested deeper than")


@pytest.mark.parametrize("value, words", [("a\u0000b", "holds a NUL character"),
                                          ("a\ud800b", "lone surrogate")])
def test_manifest_strings_no_path_can_hold(tmp_path, minilm, value, words):
    raw = json.dumps(base(minilm, output_dir=value)).encode()  # json escapes both (\u0000, \ud800)
    expect_refused(tmp_path, raw, "$.output_dir", words)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_parity_budgets_and_floors_must_be_finite(tmp_path, minilm, literal):
    doc = json.dumps(base(minilm, parity={"int8": {"min_cosine": {"min": 0.5}}}))
    expect_refused(tmp_path, doc.replace("0.5", literal).encode(), "$", "finite number")


def test_model_path_that_is_a_symlink_loop(tmp_path, minilm):
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    expect_refused(tmp_path, json.dumps(base(tmp_path / "loop")).encode(), "$.model", "cannot be resolved")


def test_model_path_of_5000_characters(tmp_path, minilm):
    expect_refused(tmp_path, json.dumps(base("m" * 5000)).encode(), "$.model", "the limit is")


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.safetensors"))
    for w in src.glob("*.safetensors"):
        (dst / w.name).symlink_to(w)
    return dst


def test_config_json_that_is_a_list(tmp_path, classifier):
    model = _copy(classifier, tmp_path / "model")
    (model / "config.json").write_text("[1, 2]")
    expect_refused(tmp_path, json.dumps(base(model, family="sequence_classification")).encode(), "$.model",
                   "expected a JSON object")


def test_config_number_that_is_a_string(tmp_path, classifier):
    model = _copy(classifier, tmp_path / "model")
    config = json.loads((model / "config.json").read_text())
    (model / "config.json").write_text(json.dumps({**config, "max_position_embeddings": "abc"}))
    expect_refused(tmp_path, json.dumps(base(model, family="sequence_classification")).encode(), "$.model",
                   "max_position_embeddings is 'abc', expected an integer")


def test_modules_json_that_is_an_object(tmp_path, minilm):
    model = _copy(minilm, tmp_path / "model")
    (model / "modules.json").write_text("{}")
    expect_refused(tmp_path, json.dumps(base(model)).encode(), "$.model", "expected a JSON list")


def test_tensorrt_profile_batch_beyond_any_engine(tmp_path, minilm):
    doc = base(minilm, targets=[{"format": "tensorrt", "precision": "fp16", "profile": {"batch": [1, 10**12, 10**15]}}])
    expect_refused(tmp_path, json.dumps(doc).encode(), "$.targets[0].profile.batch[1]", "maximum", command="build")
    lines = CliRunner().invoke(main, ["validate", str(tmp_path / "manifest.json")]).stderr.strip().splitlines()
    assert [line.split(": ")[1] for line in lines] == ["$.targets[0].profile.batch[1]", "$.targets[0].profile.batch[2]"]
    assert all("maximum" in line for line in lines)


@pytest.mark.parametrize("where", ["/", "/etc", "home", "manifest dir", "model dir", "non-artifact", "under a file",
                                   "long name", "unwritable"])
def test_validate_refuses_every_destination_build_refuses(tmp_path, tmp_path_factory, classifier, where):
    import os

    model = _copy(classifier, tmp_path_factory.mktemp("m") / "model")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "keep.txt").write_text("mine")
    (tmp_path / "file").write_text("a file")
    locked = tmp_path / "locked"
    locked.mkdir()
    out = {"/": "/", "/etc": "/etc", "home": str(Path.home()), "manifest dir": ".", "model dir": str(model.parent),
           "non-artifact": "notes", "under a file": "file/artifact", "long name": "a" * 300,
           "unwritable": "locked/artifact"}[where]
    if where == "unwritable":
        if os.geteuid() == 0:
            pytest.skip("root writes anywhere")
        locked.chmod(0o500)
    raw = json.dumps(base(model, family="sequence_classification", output_dir=out)).encode()
    try:
        for command in ("validate", "build"):
            expect_refused(tmp_path, raw, "$.output_dir", "", command)
    finally:
        locked.chmod(0o700)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "locked", "manifest.json", "notes"]
    assert (tmp_path / "notes" / "keep.txt").read_text() == "mine" and not any(locked.iterdir())


@pytest.mark.parametrize("doc,path,hint", [
    (dict(lables=["a"]), "$.lables", "did you mean 'labels'?"),
    (dict(family="embeding"), "$.family", "did you mean 'embedding'?"),
    (dict(readout={"pooling": "meen"}), "$.readout.pooling", "did you mean 'mean'?"),
    (dict(readout={"normalise": "l2"}), "$.readout.normalise", "did you mean 'normalize'?"),
    (dict(targets=[{"format": "onnx", "precision": "int9"}]), "$.targets[0].precision", "did you mean 'int8'?"),
    (dict(serving={"min_parity": {"min_cosin": 0.99}}), "$.serving.min_parity.min_cosin", "did you mean 'min_cosine'?"),
])
def test_a_typo_gets_a_did_you_mean(tmp_path, minilm, doc, path, hint):
    expect_error(tmp_path, base(minilm, **doc), path, hint)


def test_validate_reports_every_problem_and_build_stops_at_the_first(tmp_path, minilm):
    """Schema-level mistakes all at once; then, in a structurally valid manifest, every independent check
    against the model directory. One `error:` line each, exit 2, nothing written."""
    doc = base(minilm, colour="blue", max_length="long", readout={"pooling": "meen"},
               targets=[{"format": "onnx", "precision": "int9"}])
    result = run(tmp_path, doc)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and all(line.startswith("error: ") for line in lines), result.output
    assert [line.split(":")[1].strip() for line in lines] == ["$.colour", "$.max_length", "$.readout.pooling",
                                                              "$.targets[0].precision"], lines
    built = run(tmp_path, doc, command="build")
    assert built.exit_code == 2 and len(built.stderr.strip().splitlines()) == 1, built.output

    doc = base(minilm, max_length=100000, serving={"min_parity": {"min_cosin": 0.99}},
               parity={"int8": {"argmax_agreement": {"min": 0.9}}},
               evaluation={"gates": ["accuracy>=0.9"]})
    result = run(tmp_path, doc)
    lines = result.stderr.strip().splitlines()
    paths = [line.split(": ")[1] for line in lines]
    assert paths == ["$.max_length", "$.serving.min_parity.min_cosin", "$.parity.int8.argmax_agreement",
                     "$.evaluation.gates[0]"], lines
    assert "did you mean 'min_cosine'?" in lines[1]
    as_json = CliRunner().invoke(main, ["validate", str(tmp_path / "manifest.json"), "--json"])
    reply = json.loads(as_json.stdout)
    assert reply["ok"] is False and len(reply["errors"]) == 4 and reply["error"] == reply["errors"][0]
    built = run(tmp_path, doc, command="build")
    assert built.exit_code == 2 and built.stderr.strip().splitlines() == [lines[0]], built.output
    assert [p.name for p in tmp_path.iterdir()] == ["manifest.json"]


def test_a_misspelt_required_field_is_named_before_the_field_it_leaves_missing(tmp_path, minilm):
    """`build` stops at the first problem: for {"precison": ...} that is the typo (with its did-you-mean),
    not the 'precision' it leaves missing; `validate` shows both, the typo first."""
    doc = base(minilm, targets=[{"format": "onnx", "precison": "fp32"}])
    built = run(tmp_path, doc, command="build")
    assert built.exit_code == 2 and built.stderr.strip().splitlines() == [
        "error: $.targets[0].precison: unknown field; did you mean 'precision'? "
        "(known: budget, format, isa, precision, profile, runtime)"], built.output
    lines = run(tmp_path, doc).stderr.strip().splitlines()
    assert lines == [built.stderr.strip(), "error: $.targets[0].precision: required field is missing"], lines


@pytest.mark.parametrize("args,words", [
    (["build"], "Missing argument 'MANIFEST'."), (["bogus"], "No such command 'bogus'."),
    (["inspect", "--nope", "x"], "No such option '--nope'"), (["build", "a.json", "b.json"], "unexpected extra argument"),
    (["serve", "x", "--threads", "two"], "'--threads'"),
    (["inspect", __file__], "test_manifest_errors.py' is a file, not an artifact directory"),
    (["evaluate", "x", "--data", "d.jsonl", "--plots", __file__], "is a file, not a directory"),
])
def test_usage_errors_are_one_line_naming_the_help_to_read(args, words):
    """A usage mistake is one `error:` line, exit 2, pointing at the command's --help (not click's block)."""
    result = CliRunner().invoke(main, args)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert words in lines[0] and "--help')" in lines[0] and "Usage:" not in result.output, lines


def test_bare_command_still_prints_its_help():
    result = CliRunner().invoke(main, [])
    assert result.output.startswith("Usage: ") and "\n  build " in result.output and "error:" not in result.output


def test_an_unknown_field_is_offered_only_the_fields_its_family_takes(tmp_path, classifier):
    """The `known:` list after an unknown top-level field is the family's (a token classifier is not offered
    `thresholds` or `null_policy`), taken from the registry's field table, not the whole schema."""
    from readout_sdk.families import get as get_family
    from readout_export.planning.manifest import COMMON_FIELDS

    doc = base(classifier, family="sequence_classification", lables=SENTIMENT)
    message = expect_error(tmp_path, doc, "$.lables", "did you mean 'labels'?")
    offered = set(message.split("(known: ")[1].rstrip(")").split(", "))
    spec = get_family("sequence_classification")
    assert offered and all(k in COMMON_FIELDS or k in spec.manifest_fields for k in offered), offered
    assert {"null_policy", "stride", "thresholds"}.isdisjoint(offered) and "labels" in offered


# ---- validate refuses everything build would (issue 35): each was `validate` OK, then `build` exit 1 ----
def refused_by_both(tmp_path: Path, doc: dict, path: str, words: str) -> str:
    """validate and build both refuse ``doc`` with the same one line (exit 2), and nothing is written."""
    lines = [expect_error(tmp_path, doc, path, words, command) for command in ("validate", "build")]
    assert lines[0] == lines[1], lines
    assert not any(name in lines[0] for name in ("Error:", "Exception", "Traceback")), lines[0]
    return lines[0]


def _variant(classifier: Path, where: Path, config: dict | None = None, drop: tuple = (),
             files: dict | None = None) -> Path:
    """A copy of ``classifier`` with config.json fields changed, files dropped or replaced."""
    model = _copy(classifier, where)
    if config:
        doc = json.loads((model / "config.json").read_text())
        (model / "config.json").write_text(json.dumps({**doc, **config}))
    for name in drop:
        (model / name).unlink()
    for name, data in (files or {}).items():
        (model / name).parent.mkdir(parents=True, exist_ok=True)
        (model / name).write_bytes(data)
    return model


def test_repeated_labels_in_config(tmp_path, tmp_path_factory, classifier):
    model = _variant(classifier, tmp_path_factory.mktemp("v") / "m", {"id2label": {"0": "x", "1": "x", "2": "y"}})
    refused_by_both(tmp_path, base(model, family="sequence_classification"), "$.model",
                    "id2label repeats ['x']")


@pytest.mark.parametrize("key, value", [("hidden_size", 0), ("max_position_embeddings", 10 ** 30),
                                        ("num_attention_heads", -1), ("num_hidden_layers", "2"),
                                        ("num_labels", 1 << 31)])  # transformers would name 2**31 labels: 18 GB
def test_config_sizes_no_tensor_can_have(tmp_path, tmp_path_factory, classifier, key, value):
    model = _variant(classifier, tmp_path_factory.mktemp("v") / "m", {key: value})
    refused_by_both(tmp_path, base(model, family="sequence_classification"), "$.model",
                    f"config.json: {key} is {value!r}, expected an integer from")


def test_hidden_size_not_a_multiple_of_heads(tmp_path, tmp_path_factory, classifier):
    model = _variant(classifier, tmp_path_factory.mktemp("v") / "m", {"hidden_size": 33})
    refused_by_both(tmp_path, base(model, family="sequence_classification"), "$.model",
                    "hidden_size 33 is not a multiple of num_attention_heads 2")


def test_garbage_pytorch_model_bin(tmp_path, tmp_path_factory, classifier):
    model = _variant(classifier, tmp_path_factory.mktemp("v") / "m", drop=("model.safetensors",),
                     files={"pytorch_model.bin": b"PK\x03\x04 not a zip" * 10})
    refused_by_both(tmp_path, base(model, family="sequence_classification"), "$.model",
                    "pytorch_model.bin: not a PyTorch state dict that loads with weights_only=True")


@pytest.mark.parametrize("cut", [4, 100, -10])
def test_damaged_safetensors(tmp_path, tmp_path_factory, classifier, cut):
    data = (classifier / "model.safetensors").read_bytes()
    model = _variant(classifier, tmp_path_factory.mktemp("v") / "m", drop=("model.safetensors",), files={"model.safetensors": data[:cut]})
    refused_by_both(tmp_path, base(model, family="sequence_classification"), "$.model",
                    "model.safetensors: not a readable safetensors file")


def test_weights_that_disagree_with_config(tmp_path, tmp_path_factory, classifier):
    """transformers' size-mismatch RuntimeError at load, refused from the safetensors header instead."""
    model = _variant(classifier, tmp_path_factory.mktemp("v") / "m", {"intermediate_size": 40})
    refused_by_both(tmp_path, base(model, family="sequence_classification"), "$.model",
                    "tensor bert.encoder.layer.0.intermediate.dense.bias has shape [37], but config.json implies [40]")


def test_head_tensors_missing(tmp_path, tmp_path_factory):
    bare = synthetic.make_model("bert", "embedding", tmp_path_factory.mktemp("bare") / "m")
    refused_by_both(tmp_path, base(bare, family="sequence_classification"), "$.model",
                    "it would run with random weights")


def test_checkpoint_of_another_head(tmp_path, classifier):
    """A sequence classifier's weights fit a token classifier's head tensor for tensor: refused by architecture."""
    refused_by_both(tmp_path, base(classifier, family="token_classification"), "$.family",
                    "config.json architectures declares BertForSequenceClassification")


@pytest.mark.parametrize("max_length, words", [(2, "2 leaves no room for a question and its context"),
                                               (8, "8 is too short for extractive_qa")])
def test_qa_max_length_without_room(tmp_path, tmp_path_factory, max_length, words):
    qa = synthetic.make_model("bert", "extractive_qa", tmp_path_factory.mktemp("qa") / "m")
    refused_by_both(tmp_path, base(qa, family="extractive_qa", max_length=max_length), "$.max_length", words)


def test_max_length_without_room_for_text(tmp_path, classifier):
    refused_by_both(tmp_path, base(classifier, family="sequence_classification", max_length=2), "$.max_length",
                    "2 leaves no room for a text: the tokenizer adds 2 special tokens")


def test_tokenizer_ids_beyond_the_embedding_table(tmp_path, tmp_path_factory):
    """Built, this fails in the SDK with ONNX Runtime's Gather error on the first high id."""
    import transformers

    from safetensors.torch import save_file

    model_dir = tmp_path_factory.mktemp("small-vocab") / "m"
    config = synthetic.make_config("bert", 1000, id2label=dict(enumerate(SENTIMENT)))
    transformers.BertForSequenceClassification(config).save_pretrained(str(model_dir))
    synthetic.make_tokenizer("bert").save_pretrained(str(model_dir))
    assert save_file  # safetensors is what save_pretrained wrote
    refused_by_both(tmp_path, base(model_dir, family="sequence_classification"), "$.model",
                    "embedding table has 1000 rows")


def test_tokenizer_that_cannot_encode(tmp_path, tmp_path_factory, classifier):
    """A WordPiece vocabulary without its [UNK]: tokenizers fails on the first unknown word."""
    model = _copy(classifier, tmp_path_factory.mktemp("v") / "m")
    tok = json.loads((model / "tokenizer.json").read_text())
    del tok["model"]["vocab"]["[UNK]"]
    (model / "tokenizer.json").write_text(json.dumps(tok))
    refused_by_both(tmp_path, base(model, family="sequence_classification"), "$.model",
                    "cannot encode plain text")


def _st_layout(tmp_path_factory, modules: list[str], width: int = 32) -> Path:
    """A tiny BERT in a sentence-transformers layout with the modules named, in that order."""
    root = synthetic.make_model("bert", "embedding", tmp_path_factory.mktemp("st") / "m")
    paths = {"Transformer": "", "Pooling": "1_Pooling", "Normalize": "2_Normalize"}
    (root / "1_Pooling").mkdir()
    (root / "1_Pooling" / "config.json").write_text(json.dumps({"word_embedding_dimension": width,
                                                                "pooling_mode_mean_tokens": True}))
    (root / "2_Normalize").mkdir()
    (root / "modules.json").write_text(json.dumps([
        {"idx": i, "name": str(i), "path": paths[m], "type": f"sentence_transformers.models.{m}"}
        for i, m in enumerate(modules)]))
    return root


@pytest.mark.parametrize("modules, words", [
    (["Transformer", "Pooling", "Pooling", "Normalize"], "module 2 is a second Pooling"),
    (["Transformer", "Normalize", "Pooling"], "module 2 (Pooling) comes after Normalize"),
    (["Pooling", "Transformer"], "module 0 is Pooling"),
])
def test_modules_json_order(tmp_path, tmp_path_factory, modules, words):
    refused_by_both(tmp_path, base(_st_layout(tmp_path_factory, modules)), "$.model", words)


def test_pooling_width_disagrees_with_the_model(tmp_path, tmp_path_factory):
    root = _st_layout(tmp_path_factory, ["Transformer", "Pooling", "Normalize"], width=384)
    refused_by_both(tmp_path, base(root), "$.model", "word_embedding_dimension is 384, but the model's config.json "
                                                     "hidden_size is 32")


def test_default_prompt_naming_no_prompt(tmp_path, tmp_path_factory):
    root = _st_layout(tmp_path_factory, ["Transformer", "Pooling", "Normalize"])
    (root / "config_sentence_transformers.json").write_text(json.dumps(
        {"prompts": {"query": "query: "}, "default_prompt_name": "passage"}))
    refused_by_both(tmp_path, base(root), "$.model", "default_prompt_name 'passage' names no prompt")


# ---- CLI misuses and setup problems: one line, exit 2, the fix named (issue 35) ------------------------
def expect_setup(result, words: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert words in lines[0] and "unexpected failure" not in lines[0], lines
    return lines[0]


def test_min_support_zero_is_a_usage_error(tmp_path):
    result = CliRunner().invoke(main, ["evaluate", str(tmp_path), "--data", "d.jsonl", "--role", "development",
                                       "--min-support", "0"])
    expect_setup(result, "Invalid value for --min-support: must be a positive integer, got 0")


def test_plots_without_matplotlib(tmp_path, monkeypatch):
    import importlib.util

    find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else find(name, *a))
    result = CliRunner().invoke(main, ["evaluate", str(tmp_path), "--data", "d.jsonl", "--role", "development",
                                       "--plots", str(tmp_path / "plots")])
    expect_setup(result, "evaluation with --plots needs the eval extra (missing: matplotlib); install it with: "
                         "pip install 'readout-export[eval]'")


@pytest.mark.parametrize("command", ["build", "parity"])
def test_missing_export_extra(tmp_path, monkeypatch, command):
    # one wording for every command that needs the extra (issue 48 point 5): not "building needs" on parity
    import importlib.util

    find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "onnxscript" else find(name, *a))
    (tmp_path / "manifest.json").write_text("{}")
    target = str(tmp_path) if command == "parity" else str(tmp_path / "manifest.json")
    result = CliRunner().invoke(main, [command, target])
    expect_setup(result, "this command needs the export extra (missing: onnxscript); install it with: "
                         "pip install 'readout-export[export]'")


def test_missing_http_extra_is_one_line_and_exit_2(shared, monkeypatch):
    # serve-http without Starlette: the install line, exit 2, never "unexpected failure" (issue 48 point 5)
    import sys

    monkeypatch.setitem(sys.modules, "starlette", None)  # `import starlette` raises ImportError
    result = CliRunner().invoke(main, ["serve-http", str(shared("classify")[1]), "--port", "0"])
    expect_setup(result, "the HTTP server needs Starlette, uvicorn and prometheus-client: "
                         "pip install 'readout-export[http]'")


def test_a_module_an_extra_brings_missing_mid_command(tmp_path, monkeypatch):
    """An optional import failing inside any command names the extra that brings it."""
    import readout_export.build as build_module

    def missing(*args, **kwargs):
        raise ModuleNotFoundError("No module named 'openvino'", name="openvino")

    monkeypatch.setattr(build_module, "build", missing)
    (tmp_path / "manifest.json").write_text("{}")
    result = CliRunner().invoke(main, ["build", str(tmp_path / "manifest.json")])
    expect_setup(result, "this command needs openvino, which is not installed: pip install 'readout-export[openvino]'")


def test_unknown_target_to_evaluate(shared, tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"text": f"text {i}", "label": SENTIMENT[i % 3]}) + "\n" for i in range(6)))
    result = CliRunner().invoke(main, ["evaluate", str(shared("classify")[1]), "--data", str(data), "--role",
                                       "development", "--target", "onnx-fp64", "--no-keep"])
    expect_setup(result, "target 'onnx-fp64' is not in this artifact")


def test_unwritable_ledger(shared, tmp_path, monkeypatch):
    (tmp_path / "file").write_text("not a directory")
    monkeypatch.setenv("READOUT_EXPORT_LEDGER", str(tmp_path / "file" / "ledger"))
    data = tmp_path / "d.jsonl"
    data.write_text("".join(json.dumps({"text": f"text {i}", "label": SENTIMENT[i % 3]}) + "\n" for i in range(6)))
    artifact = shutil.copytree(shared("classify")[1], tmp_path / "artifact")
    result = CliRunner().invoke(main, ["evaluate", str(artifact), "--data", str(data), "--role", "development", "-q"])
    expect_setup(result, f"cannot use {tmp_path / 'file' / 'ledger'}: part of that path is a file, not a directory; "
                         "choose another location")


def test_read_only_artifact(shared, tmp_path, monkeypatch):
    """A write the account may not make (a read-only artifact; root writes anywhere, so the refusal the file
    system gives is raised where evaluate keeps its report) is a setup error naming the file and the fix."""
    import errno

    import readout_eval.run

    artifact = tmp_path / "artifact"

    def read_only(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(artifact / "evaluation.json"))

    monkeypatch.setattr(readout_eval.run, "evaluate", read_only)
    result = CliRunner().invoke(main, ["evaluate", str(artifact), "--data", "d.jsonl", "--role", "development"])
    expect_setup(result, f"cannot use {artifact / 'evaluation.json'}: permission denied; give this account access "
                         "to it, or choose another location")
