"""`readout-export calibrate` and the split-role audit: fitted parameters against brute force and a planted
temperature, the calibrated artifact against its parent (byte-identical graphs, only calibration/decision
changed, raw outputs unchanged), the SDK, Ray and serving paths applying it, and the lineage refusals.

Models: SYNTHETIC seeded heads (tiny BERT classifier, RoBERTa multilabel, RoBERTa QA with a null answer);
gold labels are written by the tests, so the numbers test the mechanics, not the models' quality."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

import readout_sdk
from helpers.artifacts import linked_copy
from helpers.corpus import TEXTS
from readout_export.cli import main
from readout_sdk.artifact import sha256_file
from readout_sdk.decode.scores import softmax, sigmoid
from readout_eval import calibrators as F
from readout_eval.tasks.base import Case

SENTIMENT = ["negative", "neutral", "positive"]
POOL = TEXTS + [t.upper() for t in TEXTS] + [f"{a} {b}" for a, b in zip(TEXTS, TEXTS[3:])] + \
    [f"{t} and then some more words" for t in TEXTS]


def write_rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def labelled(seed: int, n: int = 40):
    """Texts with gold labels drawn at random (fixed seed): a split of its own per seed."""
    rng = np.random.default_rng(seed)
    return [{"text": f"{POOL[int(rng.integers(len(POOL)))]} #{seed}-{i}", "label": SENTIMENT[int(rng.integers(3))]}
            for i in range(n)]


def cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


# ---- fitters against independent oracles ---------------------------------------------------------------
def test_temperature_fit_recovers_a_planted_temperature(shared):
    """Labels drawn from softmax(z); the cases carry logits z * 2.5: the fit must find T = 2.5 (MLE)."""
    engine = readout_sdk.load(shared("classify")[1])
    rng = np.random.default_rng(0)
    z = rng.normal(0, 2.0, (3000, 3))
    y = np.array([rng.choice(3, p=softmax(row)) for row in z])
    cases = [Case(str(i), [], None, None, None, None, {"outs": [{"logits": (z[i] * 2.5).astype(np.float32)}],
                                                         "gold": int(y[i])}) for i in range(len(z))]
    got = F.temperature(engine, cases)
    assert got["temperature"] == pytest.approx(2.5, rel=0.08)
    assert got["nll_after"] < got["nll_before"]
    # already calibrated logits: T stays near 1 and the NLL never rises
    same = [Case(c.id, [], None, None, None, None, {"outs": [{"logits": z[i].astype(np.float32)}], "gold": int(y[i])})
            for i, c in enumerate(cases)]
    flat = F.temperature(engine, same)
    assert flat["temperature"] == pytest.approx(1.0, abs=0.08) and flat["nll_after"] <= flat["nll_before"]


def test_multilabel_thresholds_equal_a_brute_force_search():
    """Per label, the F1 at the fitted threshold is the best F1 over every possible cut; with a precision
    target, the fitted cut reaches it with the most recall any cut reaching it has."""
    rng = np.random.default_rng(1)
    scores = rng.random((200, 3))
    gold = (scores + rng.normal(0, 0.3, scores.shape) > 0.6).astype(int)
    fitted = F.thresholds(["a", "b", "c"], scores, gold, [0.5, 0.5, 0.5])["thresholds"]
    target = F.thresholds(["a", "b", "c"], scores, gold, [0.5, 0.5, 0.5], precision=0.8)["thresholds"]
    for j in range(3):
        s, y = scores[:, j], gold[:, j].astype(bool)

        def f1(t):
            yhat = s >= t
            tp = (yhat & y).sum()
            return 2 * tp / (yhat.sum() + y.sum())

        def prec_rec(t):
            yhat = s >= t
            tp = (yhat & y).sum()
            return (tp / yhat.sum() if yhat.sum() else 0.0), tp / y.sum()

        grid = np.concatenate([np.unique(s), [s.max() + 1]])
        assert f1(fitted[j]) == pytest.approx(max(f1(t) for t in grid))
        reach = [t for t in grid if prec_rec(t)[0] >= 0.8]
        assert prec_rec(target[j])[0] >= 0.8
        assert prec_rec(target[j])[1] == pytest.approx(max(prec_rec(t)[1] for t in reach))


def test_null_threshold_and_abstention_equal_brute_force():
    """QA: the summed F1 at the fitted margin is the best over every cut (null iff margin > cut); abstention:
    the fitted cut gives at least the declared coverage with the highest cut, and the most coverage within
    the declared risk."""
    rng = np.random.default_rng(2)
    n = 120
    margin = np.round(rng.normal(0, 1, n), 2)  # rounded: ties in the margin must be taken together
    answerable = rng.random(n) < 0.6
    span_f1 = np.where(answerable, rng.random(n), 0.0)
    cases = [Case(str(i), [], None, None, None, None, {"margin": float(margin[i]), "answerable": bool(answerable[i]),
                                                         "span_scores": (0.0, float(span_f1[i]))}) for i in range(n)]

    def total(cut):  # F1 summed over cases when the null answer wins above the cut
        null = margin > cut
        return float(np.where(null, ~answerable, np.where(answerable, span_f1, 0.0)).sum())

    got = F.null_threshold(cases)
    assert total(got["null_threshold"]) == pytest.approx(max(total(c) for c in np.concatenate([[-99], margin])))
    assert got["f1_sum"] == pytest.approx(total(got["null_threshold"]))

    top = np.round(rng.random(n), 2)
    correct = rng.random(n) < top  # more confident, more often right
    a = F.abstention(top, correct, 0.7, None)
    assert (top >= a["min_score"]).mean() >= 0.7
    assert not any((top >= c).mean() >= 0.7 for c in np.unique(top) if c > a["min_score"])
    r = F.abstention(top, correct, None, 0.2)
    answered = top >= r["min_score"]
    assert 1 - correct[answered].mean() <= 0.2 + 1e-12
    feasible = [(top >= c).mean() for c in np.unique(top) if 1 - correct[top >= c].mean() <= 0.2]
    assert answered.mean() == pytest.approx(max(feasible))
    with pytest.raises(F.FitRefused, match="risk"):
        F.abstention(np.array([0.9, 0.8]), np.array([False, False]), None, 0.1)


# ---- the calibrated artifact ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def calibrated(shared, tmp_path_factory):
    """A linked copy of the tiny classifier, calibrated (temperature + abstention at 80 % coverage)."""
    root = tmp_path_factory.mktemp("calibrated")
    parent = linked_copy(shared("classify")[1], root / "parent")
    cal = write_rows(root / "calibration.jsonl", labelled(1, 60))
    result = cli("calibrate", parent, "--data", cal, "--output", root / "child", "--coverage", "0.8", "--json")
    assert result.exit_code == 0, result.output
    return {"root": root, "parent": parent, "child": root / "child", "cal": cal,
            "summary": json.loads(result.output)}


def test_calibrated_artifact_keeps_graphs_and_changes_only_calibration_and_decision(calibrated):
    """Byte-identical graphs and tokenizer; diff: only the calibration and decision layers; raw outputs and
    the raw-score cache key unchanged; NLL on the calibration split does not rise."""
    parent, child = calibrated["parent"], calibrated["child"]
    pm, cm = (json.loads((p / "readout.json").read_text()) for p in (parent, child))
    for t in pm["targets"]:
        assert sha256_file(child / t["file"]) == sha256_file(parent / t["file"])
    assert sha256_file(child / "tokenizer.json") == sha256_file(parent / "tokenizer.json")
    d = cli("diff", parent, child, "--json")
    assert d.exit_code == 1
    doc = json.loads(d.output)
    assert {k for k, v in doc["layers"].items() if v == "changed"} == {"calibration", "decision"}
    assert doc["invalidates"] == {"contextual_cache": False, "vector_cache": False, "raw_scores": False,
                                  "calibrated_scores": True, "decisions": True}
    pe, ce = readout_sdk.load(parent), readout_sdk.load(child)
    for a, b in zip(pe.raw_outputs(TEXTS), ce.raw_outputs(TEXTS)):
        np.testing.assert_array_equal(a[0]["logits"], b[0]["logits"])
    assert pe.cache_key("raw_scores") == ce.cache_key("raw_scores")
    assert pe.cache_key("calibrated_scores") != ce.cache_key("calibrated_scores")
    t = cm["abi"]["calibration"]["parameters"]["temperature"]
    assert cm["abi"]["calibration"]["data"]["sha256"] == sha256_file(calibrated["cal"])
    assert cm["abi"]["calibration"]["data"]["role"] == "calibration"
    fitted = calibrated["summary"]["calibration"]["metrics"]
    assert fitted["nll_after"] <= fitted["nll_before"]
    before = cli("evaluate", parent, "--data", calibrated["cal"], "--role", "calibration", "--no-keep", "--report",
                 calibrated["root"] / "p.json")
    after = cli("evaluate", child, "--data", calibrated["cal"], "--role", "calibration", "--no-keep", "--report",
                calibrated["root"] / "c.json")
    assert before.exit_code == 0 and after.exit_code == 0
    nll = [json.loads((calibrated["root"] / f).read_text())["metrics"]["nll"] for f in ("p.json", "c.json")]
    assert nll[1] <= nll[0] + 1e-9
    assert t > 0 and math.isfinite(t)


def test_sdk_ray_and_serve_apply_the_calibration(calibrated, tmp_path):
    """Probabilities are softmax(raw logits / T) computed here with numpy; a top probability under the fitted
    min_score is an abstention (label None); Ray's Predictor and `readout-export serve` return the same."""
    import pyarrow as pa

    from readout_sdk.serving.ray import Predictor
    from helpers.triton_server import ServeProcess, infer

    child = calibrated["child"]
    record = json.loads((child / "readout.json").read_text())["abi"]
    t = record["calibration"]["parameters"]["temperature"]
    floor = record["output"]["abstention"]["min_score"]
    engine = readout_sdk.load(child)
    texts = POOL[:24]
    got = engine.classify(texts)
    raw = engine.raw_outputs(texts)
    for r, o in zip(got, raw):
        p = softmax(o[0]["logits"].astype(np.float64) / t)
        np.testing.assert_allclose([r.scores[lab] for lab in SENTIMENT], p, rtol=1e-6)
        assert r.abstained == (p.max() < floor)
        assert r.label == (None if r.abstained else SENTIMENT[int(np.argmax(p))])
    assert any(r.abstained for r in got) and not all(r.abstained for r in got)
    table = Predictor(child)(pa.table({"text": texts})).to_pylist()
    for row, r in zip(table, got):
        assert row["label"] == r.label and row["abstained"] == r.abstained
        assert row["score"] == pytest.approx(r.score, rel=1e-6)
    with ServeProcess(child, tmp_path / "triton.log") as served:
        reply = infer(served.url("http"), "m", {"text": texts[:8]}, "http")
    for row, r in zip(reply, got[:8]):
        assert row["label"] == r.label and row["abstained"] == r.abstained
        assert row["scores"] == pytest.approx(r.scores, rel=1e-6)


def test_split_roles_are_audited_across_the_lineage(calibrated, tmp_path):
    """calibrate refuses data evaluated as test; evaluate --role test refuses the calibration data (each
    naming the file and the earlier use); a test file seen by the parent is flagged on the child."""
    parent = linked_copy(calibrated["parent"], tmp_path / "parent")
    test = write_rows(tmp_path / "test.jsonl", labelled(2, 40))
    first = cli("evaluate", parent, "--data", test, "--role", "test", "--gate", "accuracy>=0", "-q")
    assert first.exit_code == 0, first.output
    refused = cli("calibrate", parent, "--data", test, "--output", tmp_path / "never")
    assert refused.exit_code == 2 and not (tmp_path / "never").exists()
    assert "test.jsonl" in refused.output and "used as test data by `evaluate`" in refused.output
    child_cal = write_rows(tmp_path / "cal.jsonl", labelled(3, 40))
    made = cli("calibrate", parent, "--data", child_cal, "--output", tmp_path / "child")
    assert made.exit_code == 0, made.output
    again = cli("evaluate", tmp_path / "child", "--data", child_cal, "--role", "test")
    assert again.exit_code == 2 and "used as calibration data by `calibrate`" in again.output
    flagged = cli("evaluate", tmp_path / "child", "--data", test, "--role", "test", "--report", tmp_path / "r.json")
    report = json.loads((tmp_path / "r.json").read_text())
    assert any("already evaluated by `evaluate` on release" in f for f in report["flags"]), report["flags"]
    assert report["tainted"] is True  # the same graphs: only calibration changed, chosen after those results
    assert flagged.exit_code == 1  # and nothing was gated: a test run with no gate never passes
    lineage = json.loads((tmp_path / "child" / "readout.json").read_text())["lineage"]["data"]
    mine = {sha256_file(test), sha256_file(child_cal)}
    assert [(u["role"], u["use"]) for u in lineage if u["sha256"] in mine] == [
        ("test", "evaluate"), ("calibration", "calibrate"), ("test", "evaluate")]
    # a sibling (another calibration of the same parent) sees the test use through the lineage ledger, and a
    # reordered copy of the test split with new ids is still the test split
    rows = [json.loads(line) for line in test.read_text().splitlines()][::-1]
    shuffled = write_rows(tmp_path / "test-copy.jsonl", [dict(r, id=f"x{k}") for k, r in enumerate(rows)])
    sibling = cli("calibrate", parent, "--data", shuffled, "--output", tmp_path / "sibling")
    assert sibling.exit_code == 2 and "40 of these 40 rows" in sibling.output and not (tmp_path / "sibling").exists()
    other = write_rows(tmp_path / "cal2.jsonl", labelled(6, 40))
    assert cli("calibrate", parent, "--data", other, "--output", tmp_path / "sibling", "--coverage", "0.9").exit_code == 0
    seen = cli("evaluate", tmp_path / "sibling", "--data", test, "--role", "test", "--gate", "accuracy>=0",
               "--report", tmp_path / "s.json")
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["verdict"] == "PASS" and doc["tainted"] is True and seen.exit_code == 1  # passes, yet cannot promote


# formatting edits a test split may get on its way to calibrate: each leaves what the task reads unchanged
EDITS = {
    "an unused field": lambda r: dict(r, source="crawl-7"),
    "a trailing space": lambda r: dict(r, text=r["text"] + " "),
    "upper case": lambda r: dict(r, text=r["text"].upper()),
    "no-break spaces": lambda r: dict(r, text=r["text"].replace(" ", "\u00a0")),
    "a zero-width space": lambda r: dict(r, text=r["text"][:1] + "\u200b" + r["text"][1:]),
    "reordered keys and new ids": lambda r: {"id": f"z-{r['text']}", **{k: r[k] for k in reversed(r)}},
}


def write_raw(path, rows):
    """As an editor would save it: non-ASCII characters as themselves, not JSON escapes."""
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_the_audit_keys_rows_on_content_not_formatting(calibrated, tmp_path):
    """The test split after any formatting edit is still the test split: calibrate refuses it, naming the
    file and the earlier use. Other rows are accepted; a file sharing under half of its rows and under half of
    the test split's is accepted and flagged; a test split padded with more new rows than its own is refused
    (half of the test split is inside it)."""
    parent = linked_copy(calibrated["parent"], tmp_path / "parent")
    rows = labelled(20, 40)
    test = write_rows(tmp_path / "test.jsonl", rows)
    ran = cli("evaluate", parent, "--data", test, "--role", "test", "--gate", "accuracy>=0", "--no-keep", "-q")
    assert ran.exit_code == 0, ran.output
    for name, edit in EDITS.items():
        edited = write_raw(tmp_path / "edited.jsonl", [edit(r) for r in rows])
        assert sha256_file(edited) != sha256_file(test), name
        refused = cli("calibrate", parent, "--data", edited, "--output", tmp_path / "never")
        assert refused.exit_code == 2, (name, refused.output)
        assert "edited.jsonl: 40 of these 40 rows" in refused.output, (name, refused.output)
        assert "used as test data by `evaluate`" in refused.output and "test.jsonl" in refused.output, name
        assert refused.output.strip().count("\n") == 0 and not (tmp_path / "never").exists(), name
    padded = write_rows(tmp_path / "padded.jsonl", rows + labelled(21, 50))  # 40 of 90: under half of it
    refused = cli("calibrate", parent, "--data", padded, "--output", tmp_path / "never")
    assert refused.exit_code == 2 and "40 of these 90 rows" in refused.output, refused.output
    # a label or a word changed is another row: 10 test rows among 30 new ones is under half of both files
    changed = [dict(r, text=r["text"] + " indeed") for r in rows[:20]] + \
        [dict(r, label=next(s for s in SENTIMENT if s != r["label"])) for r in rows[20:30]]
    some = write_raw(tmp_path / "some.jsonl", [EDITS["upper case"](r) for r in rows[30:]] + changed)
    made = cli("calibrate", parent, "--data", some, "--output", tmp_path / "child", "--json")
    assert made.exit_code == 0, made.output
    flags = json.loads(made.output)["flags"]
    assert len(flags) == 1 and flags[0].startswith("10 of these rows were test data for `evaluate`"), flags


def test_records_from_before_content_keys_are_compared_as_raw_rows(calibrated, tmp_path):
    """A ledger line written with raw row digests (bare hex) is never compared with content keys: an exact
    copy of its rows (reordered, new ids) is still refused through the raw digests."""
    from readout_eval import data as D
    from readout_eval import lineage as L

    parent = linked_copy(calibrated["parent"], tmp_path / "parent")
    rows = labelled(22, 20)
    old = D.read(write_rows(tmp_path / "old.jsonl", rows))
    entry = L.entry(old.use("test"), "test", "evaluate", "0" * 64, None)
    entry["row_digests"] = [D.row_digest(r) for r in old.rows]  # what an older version kept
    L.append(L.root_of(json.loads((parent / "readout.json").read_text())["abi"]), entry)
    copy = write_rows(tmp_path / "copy.jsonl", [dict(r, id=f"n{k}") for k, r in enumerate(rows[::-1])])
    refused = cli("calibrate", parent, "--data", copy, "--output", tmp_path / "never")
    assert refused.exit_code == 2 and "20 of these 20 rows" in refused.output, refused.output


def test_lifecycle_reaches_evaluated_only_on_a_passing_test_run(calibrated, tmp_path):
    """After parity a passing gated test run makes the calibrated artifact EVALUATED; a later failing test run
    takes it back to RECONCILED; JUnit has one case per gate and a failure for the failed one."""
    child = linked_copy(calibrated["child"], tmp_path / "child")
    assert cli("parity", child, "--widths", "1,7", "-q").exit_code == 0
    engine = readout_sdk.load(child)
    texts = POOL[:30]
    # gold = the argmax the calibrated SDK reports, so accuracy is exactly 1 (what is tested is the lifecycle)
    gold = [max(r.scores, key=r.scores.get) for r in engine.classify(texts)]
    test = write_rows(tmp_path / "t.jsonl", [{"text": t, "label": g} for t, g in zip(texts, gold)])
    ok = cli("evaluate", child, "--data", test, "--role", "test", "--gate", "accuracy>=0.99", "--junit",
             tmp_path / "ok.xml")
    assert ok.exit_code == 0, ok.output
    state = json.loads((child / "readout.json").read_text())["lifecycle"]
    assert state["state"] == "EVALUATED" and any(e["file"] == "evaluation.json" for e in state["rests_on"])
    bad = cli("evaluate", child, "--data", test, "--role", "test", "--gate", "accuracy>=0.99", "--gate", "nll<=0",
              "--junit", tmp_path / "reports" / "bad.xml")  # reports/ does not exist yet: it is made
    assert bad.exit_code == 1
    assert json.loads((child / "readout.json").read_text())["lifecycle"]["state"] == "RECONCILED"
    xml = (tmp_path / "reports" / "bad.xml").read_text()
    assert xml.count("<testcase") == 2 and xml.count("<failure") == 1 and "nll&lt;=0" in xml


def test_multilabel_and_qa_calibrate_only_the_decision_layer(shared, tmp_path):
    """Thresholds and the QA null margin are decision parameters: the calibration layer keeps its digest,
    the decision layer changes, and the SDK decides with the fitted values."""
    ml = linked_copy(shared("multilabel")[1], tmp_path / "ml")
    labels = ["toxic", "spam", "urgent"]
    rng = np.random.default_rng(4)
    rows = [{"text": POOL[i % len(POOL)] + f" {i}", "labels": [lab for lab in labels if rng.random() < 0.4]}
            for i in range(48)]
    data = write_rows(tmp_path / "ml.jsonl", rows)
    assert cli("calibrate", ml, "--data", data, "--output", tmp_path / "ml2").exit_code == 0
    doc = json.loads(cli("diff", ml, tmp_path / "ml2", "--json").output)
    assert doc["layers"]["calibration"] == "same" and doc["layers"]["decision"] == "changed"
    th = json.loads((tmp_path / "ml2" / "readout.json").read_text())["abi"]["output"]["thresholds"]
    engine = readout_sdk.load(tmp_path / "ml2")
    for r, o in zip(engine.classify(POOL[:12]), engine.raw_outputs(POOL[:12])):
        p = sigmoid(o[0]["logits"])
        assert r.labels == tuple(lab for lab, v, t in zip(labels, p, th) if v >= t)

    qa = linked_copy(shared("qa-null")[1], tmp_path / "qa")
    ctx = "Ada Lovelace wrote notes on the Analytical Engine in London in 1843."
    qs = ["Who wrote the notes?", "Where?", "When?", "What engine?", "Why is the sky blue?", "Who ate lunch?"]
    qrows = [{"question": q, "context": ctx, "answers": {"text": [a] if a else [], "answer_start": [ctx.index(a)] if a else []}}
             for q, a in zip(qs, ["Ada Lovelace", "London", "1843", "Analytical Engine", "", ""])]
    qdata = write_rows(tmp_path / "qa.jsonl", qrows)
    assert cli("calibrate", qa, "--data", qdata, "--output", tmp_path / "qa2").exit_code == 0
    margin = json.loads((tmp_path / "qa2" / "readout.json").read_text())["abi"]["output"]["null_threshold"]
    base, tuned = readout_sdk.load(qa), readout_sdk.load(tmp_path / "qa2")
    for q in qs:
        answers = base.answer(q, ctx, top_k=20)
        null = next(a for a in answers if a.is_null)
        span = next(a for a in answers if not a.is_null)
        assert tuned.answer(q, ctx).is_null == (null.score - span.score > margin)


def test_evaluate_refuses_bad_input_in_one_line(shared, tmp_path):
    """Exit 2 with one line naming the file and line (or the gate) for bad data, unknown gates, and a
    calibrate with nothing to fit."""
    art = shared("classify")[1]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "a", "label": "negative"}\n{"text": "b", "label": "happy"}\n')
    r = cli("evaluate", art, "--data", bad, "--role", "development", "--no-keep")
    assert r.exit_code == 2 and r.output.strip().count("\n") == 0 and "bad.jsonl:2" in r.output and "happy" in r.output
    good = write_rows(tmp_path / "good.jsonl", labelled(5, 5))
    typo = cli("evaluate", art, "--data", good, "--role", "development", "--gate", "acuracy>=0.5", "--no-keep")
    assert typo.exit_code == 2 and "did you mean 'accuracy'" in typo.output
    nothing = cli("calibrate", shared("regression")[1], "--data", good, "--output", tmp_path / "x")
    assert nothing.exit_code == 2 and "nothing to calibrate" in nothing.output and not (tmp_path / "x").exists()
    before = sorted(p.name for p in art.iterdir())
    inside = cli("calibrate", art, "--data", good, "--output", art / "calibrated", "--coverage", "0.8")
    assert inside.exit_code == 2 and "inside the artifact it calibrates" in inside.output
    assert sorted(p.name for p in art.iterdir()) == before  # no folder (nor its staging) appeared in the source


# ---- what the review of this change found: each case refused in one line -----------------------------------
def test_a_calibrated_record_must_be_its_graphs_record_plus_the_overlay(calibrated, tmp_path):
    """A record claiming other weight digests than its graphs (identity recomputed to look consistent), or an
    unusable temperature, is refused at load naming the problem; inspect exits 2."""
    from readout_sdk.artifact import ArtifactError
    from readout_sdk.release.identity import compute

    for name, edit, expect in (
            ("weights", lambda r: r["identity"]["weights"].update(backbone="0" * 64), "embedded in the graph"),
            ("negative", lambda r: r["calibration"]["parameters"].update(temperature=-0.4), "temperature"),
            ("missing", lambda r: r["calibration"]["parameters"].pop("temperature"), "temperature")):
        forged = linked_copy(calibrated["child"], tmp_path / name)
        meta = json.loads((forged / "readout.json").read_text())
        edit(meta["abi"])
        body = {k: v for k, v in meta["abi"].items() if k != "identity"}
        meta["abi"]["identity"] = compute(body, meta["abi"]["identity"]["weights"])
        (forged / "readout.json").write_text(json.dumps(meta))
        with pytest.raises(ArtifactError, match=expect):
            readout_sdk.load(forged)
        shown = cli("inspect", forged)
        assert shown.exit_code == 2 and shown.output.strip().count("\n") == 0, shown.output


@pytest.mark.parametrize("key, row, says", [
    ("cross", {"query": "q", "documents": ["a", "b"], "relevant": [[0]]}, "relevant"),
    ("cross", {"query": "q", "documents": ["a", "b"], "relevant": {"\u00b2": 1}}, "relevant"),
    ("cross", {"query": "q", "documents": ["a", "b"], "relevant": {"0": 10 ** 30}}, "relevant"),
    ("cross", {"query": "q", "document": "a", "score": 10 ** 400}, "score"),
    ("qa-null", {"question": "q", "context": "some text", "answers": {"text": ["text"], "answer_start": 5}},
     "answer_start"),
    ("qa-null", {"question": "q", "context": 5, "answers": {"text": [], "answer_start": []}}, "context"),
    ("choice", {"question": "q", "choices": 5, "label": 0}, "choices"),
    ("regression", {"text": "t", "values": {"valence": 10 ** 400}}, "valence"),
    ("classify", {"text": ["a list"], "label": "negative"}, "text"),
    ("classify", {"text": "t", "label": ["negative"]}, "label"),
])
def test_malformed_rows_are_refused_in_one_line(shared, tmp_path, key, row, says):
    data = write_rows(tmp_path / "d.jsonl", [row])
    r = cli("evaluate", shared(key)[1], "--data", data, "--role", "development", "--no-keep")
    assert r.exit_code == 2 and r.output.strip().count("\n") == 0, r.output
    assert "d.jsonl:1" in r.output and says in r.output, r.output


def test_line_separators_inside_strings_and_frozen_support(calibrated, tmp_path):
    """U+2028 / U+0085 inside a JSON string do not split a row; a test run keeps the manifest's min_support,
    and a slice gate no slice can meet is one NOT_EVALUATED gate, never silently absent."""
    rows = [{"text": "great\u2028product", "label": "positive"}, {"text": "odd\x85line", "label": "negative"}]
    data = tmp_path / "sep.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    ok = cli("evaluate", calibrated["parent"], "--data", data, "--role", "development", "--no-keep", "--report",
             tmp_path / "r.json")
    assert ok.exit_code == 0, ok.output
    assert json.loads((tmp_path / "r.json").read_text())["data"]["rows"] == 2
    frozen = linked_copy(calibrated["parent"], tmp_path / "frozen")
    meta = json.loads((frozen / "readout.json").read_text())
    meta["build"]["manifest"]["evaluation"] = {"min_support": 10, "slice_gates": ["accuracy>=0.5"]}
    (frozen / "readout.json").write_text(json.dumps(meta))
    test = write_rows(tmp_path / "t.jsonl", labelled(9, 6))
    refused = cli("evaluate", frozen, "--data", test, "--role", "test", "--min-support", "1")
    assert refused.exit_code == 2 and "froze evaluation.min_support at 10" in refused.output
    cli("evaluate", frozen, "--data", test, "--role", "test", "--report", tmp_path / "t.json")
    gates = json.loads((tmp_path / "t.json").read_text())["gates"]
    assert [g["decision"] for g in gates] == ["NOT_EVALUATED"] and "minimum support 10" in gates[0]["reason"]
