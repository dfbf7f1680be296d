"""Signed releases and what runs is what was checked (issue 35, points 1, 2 and 4).

Forgeries are made the way an attacker with write access to the artifact would: the bytes changed *and*
every sha256 in readout.json recomputed (and the graph's embedded record rewritten with onnx), so hashes
alone cannot tell them apart. Oracles: `cryptography`'s own Ed25519 verification (a signature made here
by the library, not by the code under test, must be accepted; one over other bytes refused), and the
model's eager outputs through an independent ONNX Runtime session on the original bytes.
Model: SYNTHETIC tiny BERT sequence classifier (shared fixture "classify")."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

import readout_sdk
from readout_export.cli import main
from readout_sdk.artifact import ArtifactError, open_artifact
from readout_sdk.release import signing
from readout_sdk.release.evidence import kept_status, read_kept
from readout_sdk.release.lifecycle import derive, keep

TEXTS = ["a fine day", "terrible service, never again"]


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _meta(root: Path) -> dict:
    return json.loads((root / "readout.json").read_text())


def _write_meta(root: Path, meta: dict) -> None:
    (root / "readout.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


def _rehash(root: Path) -> None:
    """What an attacker does after editing files: recompute every sha256 readout.json lists."""
    meta = _meta(root)
    for t in meta["targets"]:
        t["sha256"] = _sha(root / t["file"])
    meta["tokenizer"]["sha256"] = _sha(root / meta["tokenizer"]["file"])
    meta["abi"]["provenance"]["tokenizer_sha256"] = meta["tokenizer"]["sha256"]
    _write_meta(root, meta)


def _reidentify(record: dict) -> None:
    """Recompute the layered identity of an edited record, as an attacker with this package would."""
    from readout_sdk.release.identity import compute

    record["identity"] = compute({k: v for k, v in record.items() if k != "identity"}, record["identity"]["weights"])


def _rewrite_graph_record(root: Path, record: dict) -> None:
    """Embed ``record`` in every graph, as an attacker with onnx installed would."""
    for t in _meta(root)["targets"]:
        path = root / t["file"]
        model = onnx.load(str(path))
        for p in model.metadata_props:
            if p.key == "readout.abi":
                p.value = json.dumps(record)
        onnx.save(model, str(path))


@pytest.fixture
def art(shared, tmp_path) -> Path:
    dest = tmp_path / "art"
    shutil.copytree(shared("classify")[1], dest)
    return dest


@pytest.fixture
def keys(tmp_path) -> tuple[Path, Path]:
    """(private key, public key) made through the CLI, as a user makes them."""
    result = CliRunner().invoke(main, ["keygen", str(tmp_path / "release.key")])
    assert result.exit_code == 0, result.output
    return tmp_path / "release.key", tmp_path / "release.key.pub"


def _sign(root: Path, key: Path) -> None:
    result = CliRunner().invoke(main, ["sign", str(root), "--key", str(key)])
    assert result.exit_code == 0, result.output


def _refused(root: Path, pattern: str, **kwargs) -> None:
    with pytest.raises(ArtifactError, match=pattern):
        readout_sdk.load(root, device="cpu", **kwargs)


def test_keygen_writes_a_private_key_only_its_owner_reads_and_never_overwrites(keys, tmp_path):
    private, public = keys
    assert oct(private.stat().st_mode & 0o777) == "0o600"
    from cryptography.hazmat.primitives import serialization

    loaded = serialization.load_pem_private_key(private.read_bytes(), None)  # the library reads what we wrote
    assert loaded.public_key().public_bytes(serialization.Encoding.PEM,
                                            serialization.PublicFormat.SubjectPublicKeyInfo) == public.read_bytes()
    before = private.read_bytes()
    result = CliRunner().invoke(main, ["keygen", str(private)])
    assert result.exit_code == 2 and "never overwritten" in result.output and private.read_bytes() == before


def test_signed_artifact_loads_under_the_policy_and_verify_names_the_key(art, keys):
    private, public = keys
    _sign(art, private)
    kid = signing.read_public_key(public).key_id
    engine = readout_sdk.load(art, device="cpu", trusted_keys=[public])
    assert engine.signed_by == kid and engine.classify(TEXTS)
    result = CliRunner().invoke(main, ["verify", str(art), "--trusted-key", str(public)])
    assert result.exit_code == 0, result.output
    assert f"signed by trusted key {kid}" in result.output
    shown = CliRunner().invoke(main, ["inspect", str(art)])
    assert shown.exit_code == 0 and f"  signatures signed by {kid}" in shown.output


def test_a_signature_made_by_cryptography_itself_is_accepted(art, tmp_path):
    """Interoperability oracle: a signature computed with the library directly over the documented
    payload verifies, so the format is what docs/trust.md says, not whatever sign_bytes happens to do."""
    import base64

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    pub = tmp_path / "k.pub"
    pub.write_bytes(key.public_key().public_bytes(serialization.Encoding.PEM,
                                                  serialization.PublicFormat.SubjectPublicKeyInfo))
    sha = _sha(art / "readout.json")
    signed = {"readout.json": {"sha256": sha}, "release_id": None, "signed_at": "2026-12-05T00:00:00+00:00"}
    message = json.dumps({"format": "readout-signature/1", **signed}, sort_keys=True, separators=(",", ":")).encode()
    doc = {"format": "readout-signature/1", "signatures": [{
        "key_id": "ed25519:" + hashlib.sha256(raw).hexdigest()[:16], "algorithm": "ed25519",
        "public_key": base64.b64encode(raw).decode(), "signed": signed,
        "signature": base64.b64encode(key.sign(message)).decode()}]}
    (art / "readout.sig").write_text(json.dumps(doc))
    assert readout_sdk.load(art, device="cpu", trusted_keys=[pub]).signed_by.startswith("ed25519:")


def test_unsigned_foreign_signed_and_changed_after_signing_are_refused(art, keys, tmp_path, monkeypatch):
    private, public = keys
    _refused(art, r"unsigned \(no readout.sig\), and the signature policy requires", trusted_keys=[public])
    monkeypatch.setenv("READOUT_TRUSTED_KEYS", str(public))  # the deployer's policy, from the environment
    _refused(art, "unsigned")
    other = tmp_path / "other.key"
    assert CliRunner().invoke(main, ["keygen", str(other)]).exit_code == 0
    _sign(art, other)
    _refused(art, r"signed by ed25519:\w+, not by a trusted key")
    _sign(art, private)
    assert readout_sdk.load(art, device="cpu").signed_by  # both signatures kept; the trusted one counts
    meta = _meta(art)
    meta["abi"]["output"]["labels"] = list(reversed(meta["abi"]["output"]["labels"]))
    _write_meta(art, meta)
    _refused(art, "is over another readout.json: the artifact changed after it was signed")
    monkeypatch.delenv("READOUT_TRUSTED_KEYS")
    result = CliRunner().invoke(main, ["verify", str(art), "--trusted-key", str(public)])
    assert result.exit_code == 2 and result.output.count("\n") == 1 and "changed after it was signed" in result.output


def test_a_signature_with_its_bytes_altered_does_not_verify(art, keys):
    private, public = keys
    _sign(art, private)
    doc = json.loads((art / "readout.sig").read_text())
    import base64

    sig = bytearray(base64.b64decode(doc["signatures"][0]["signature"]))
    sig[0] ^= 1
    doc["signatures"][0]["signature"] = base64.b64encode(bytes(sig)).decode()
    (art / "readout.sig").write_text(json.dumps(doc))
    _refused(art, "does not verify", trusted_keys=[public])
    (art / "readout.sig").write_text("{not json")
    _refused(art, "readout.sig cannot be read", trusted_keys=[public])


@pytest.mark.parametrize("forgery", ["graph_bytes", "labels_permuted", "calibration", "evaluation_pass"])
def test_forgeries_with_recomputed_hashes_pass_hash_checks_but_not_the_signature_policy(art, keys, forgery):
    private, public = keys
    _sign(art, private)
    meta = _meta(art)
    if forgery == "graph_bytes":  # another graph (an extra output node is enough) carrying this record
        path = art / meta["targets"][0]["file"]
        model = onnx.load(str(path))
        model.producer_name = "someone else"
        onnx.save(model, str(path))
        _rehash(art)
    elif forgery == "labels_permuted":
        record = meta["abi"]
        record["output"]["labels"] = list(reversed(record["output"]["labels"]))
        _reidentify(record)
        _write_meta(art, meta)
        _rewrite_graph_record(art, record)
        _rehash(art)
    elif forgery == "calibration":
        from readout_sdk.calibration import overlay

        meta["abi"] = overlay(meta["abi"], {"scheme": "readout-calibration/1", "method": "temperature",
                                            "parameters": {"temperature": 9.0},
                                            "data": {"sha256": "0" * 64, "rows": 100, "role": "calibration"}}, {})
        _write_meta(art, meta)
    else:  # a failed gate edited to PASS, listed with its recomputed sha256
        release = meta["abi"]["identity"]["release_id"]
        keep(art, "evaluation", {"schema": "readout-evaluation/1", "release_id": release, "runs": [
            {"role": "test", "release_id": release, "verdict": "PASS", "gates": [{"decision": "PASS"}]}]},
             {"verdict": "PASS"})
    open_artifact(art)  # every hash and embedded record is consistent: hashes alone accept it
    _refused(art, "changed after it was signed", trusted_keys=[public])
    result = CliRunner().invoke(main, ["promote", str(art), "--parent", str(art), "--trusted-key", str(public)])
    assert result.exit_code == 2 and "changed after it was signed" in result.output


def test_a_record_whose_label_map_is_wider_than_the_head_is_refused_at_load(art):
    """4 labels over a 3-wide head, record and graph metadata agreeing (hashes recomputed): the graph's
    own output shape disagrees, and load says so instead of an IndexError at classify time."""
    meta = _meta(art)
    record = meta["abi"]
    record["output"]["labels"] = record["output"]["labels"] + ["extra"]
    record["outputs"][0]["shape"][-1] = len(record["output"]["labels"])
    _reidentify(record)
    _write_meta(art, meta)
    _rewrite_graph_record(art, record)
    _rehash(art)
    _refused(art, r"model.onnx-fp32.onnx: output 'logits' is 3 wide on axis 1 in the graph, the record "
                  r"\(\$.outputs\[0\].shape\[1\]\) states 4")
    record["outputs"][0]["shape"][-1] = 3  # the record now contradicts itself: refused before any graph opens
    _reidentify(record)
    _write_meta(art, meta)
    _refused(art, r"\$.outputs\[0\].shape: 'logits' is 3 wide, but \$.output.labels names 4 labels")


def test_the_runtime_gets_the_bytes_that_were_hashed_not_the_file_reopened(art, monkeypatch):
    """A graph replaced right after its hash was checked (the race a concurrent writer wins) must not run:
    the outputs are the original graph's, computed by an independent session on the original bytes."""
    import onnxruntime as ort

    import readout_sdk.artifact as artifact_module

    graph = art / _meta(art)["targets"][0]["file"]
    original = graph.read_bytes()
    tampered = onnx.load_from_string(original)
    for init in tampered.graph.initializer:  # the head's weight [labels, hidden], rows rescaled: other scores
        if len(init.dims) == 2 and init.dims[0] == 3:
            arr = onnx.numpy_helper.to_array(init) * np.array([[1.0], [-4.0], [6.0]], np.float32)
            init.CopyFrom(onnx.numpy_helper.from_array(arr.astype(np.float32), init.name))
    tampered_bytes = tampered.SerializeToString()
    assert tampered_bytes != original  # the head's weight was found and changed
    real = artifact_module.read_verified

    def read_then_swap(root, name, expected):
        data = real(root, name, expected)
        if name == graph.name:
            graph.write_bytes(tampered_bytes)  # replaced after the check, before any runtime opens a file
        return data

    monkeypatch.setattr(artifact_module, "read_verified", read_then_swap)
    engine = readout_sdk.load(art, device="cpu")
    assert graph.read_bytes() == tampered_bytes
    session = ort.InferenceSession(original, providers=["CPUExecutionProvider"])
    enc = engine.context.encoder.tokenizer.encode_batch(TEXTS)
    width = max(len(e.ids) for e in enc)
    feed = {"input_ids": np.array([e.ids + [0] * (width - len(e.ids)) for e in enc], np.int64),
            "attention_mask": np.array([[1] * len(e.ids) + [0] * (width - len(e.ids)) for e in enc], np.int64)}
    if "token_type_ids" in {i.name for i in session.get_inputs()}:
        feed["token_type_ids"] = np.zeros_like(feed["input_ids"])
    expected = session.run(["logits"], feed)[0]
    got = np.array([[r.scores[label] for label in engine.labels] for r in engine.classify(TEXTS)])
    probs = np.exp(expected - expected.max(1, keepdims=True))
    np.testing.assert_allclose(got, probs / probs.sum(1, keepdims=True), atol=1e-5)


def test_a_listed_report_of_another_shape_is_ignored_not_a_crash(art):
    release = _meta(art)["abi"]["identity"]["release_id"]
    keep(art, "parity", ["not", "an", "object"], {"summary": "forged"})  # listed with its sha256
    assert kept_status(art, "parity", _meta(art)) == "malformed"
    assert readout_sdk.load(art, device="cpu").classify(TEXTS)
    assert "not a JSON object" in " ".join(derive(open_artifact(art)).missing)
    result = CliRunner().invoke(main, ["inspect", str(art)])
    assert result.exit_code == 0 and "Traceback" not in result.output
    keep(art, "parity", {"release_id": release, "checks": "not a list", "target_files": ["x"]}, {})
    assert derive(open_artifact(art)).state == "DRAFT"


KILLER = textwrap.dedent("""
    import sys, time
    from readout_sdk.release.lifecycle import keep
    root, n = sys.argv[1], 0
    while True:  # report after report, until killed at some point of a keep
        n += 1
        keep(root, "evaluation", lambda kept: ({"release_id": "r", "runs": ((kept or {}).get("runs") or []) + [n]},
                                               {"runs": n}))
""")


def test_a_keep_killed_at_any_point_leaves_a_listed_report_and_blocks_nothing(art):
    """SIGKILL at seeded random moments during a stream of keeps: afterwards the listed report is always
    readable, no kept file is half-listed, and the next keep (by another process) goes through."""
    rng = np.random.default_rng(35)
    for delay in rng.uniform(0.3, 1.2, size=4):
        proc = subprocess.Popen([sys.executable, "-c", KILLER, str(art)])
        try:
            proc.wait(timeout=delay)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
        listing = _meta(art)
        if "evaluation" in listing:
            assert read_kept(art, "evaluation", listing) is not None  # the listed bytes: file or pending
        keep(art, "evaluation", lambda kept: ({"release_id": "r", "runs": ((kept or {}).get("runs") or []) + ["after"]},
                                              {}))
        listing = _meta(art)
        assert kept_status(art, "evaluation", listing) == "listed"
        assert read_kept(art, "evaluation", listing)["runs"][-1] == "after"
        assert not (art / ".evaluation.json.pending").exists()


def test_an_unlisted_report_is_moved_aside_with_a_warning_never_deleted(art, capsys):
    (art / "evaluation.json").write_text('{"mine": true}')
    keep(art, "evaluation", {"release_id": "r", "runs": []}, {})
    aside = [p for p in art.iterdir() if p.name.startswith("evaluation.json.ignored-")]
    assert len(aside) == 1 and aside[0].read_text() == '{"mine": true}'
    warned = capsys.readouterr().err
    assert warned.count("\n") == 1 and "warning:" in warned and "moved aside" in warned
    assert kept_status(art, "evaluation", _meta(art)) == "listed"


@pytest.mark.parametrize("command", [["serve-http", "--port", "0"], ["serve", "--http-port", "1"], ["encode"]])
def test_serving_commands_refuse_an_unsigned_artifact_under_the_policy_before_serving(art, keys, command, tmp_path):
    """serve-http, serve and encode share the load options: --trusted-key refuses an unsigned artifact
    with one line and exit 2 before any server or cluster starts."""
    _, public = keys
    args = [command[0], str(art), *command[1:], "--trusted-key", str(public)]
    if command[0] == "encode":
        args = [command[0], str(art), "--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "out"),
                "--trusted-key", str(public)]
        (tmp_path / "in.jsonl").write_text('{"text": "a"}\n')
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert result.output.count("error:") == 1 and "unsigned (no readout.sig)" in result.output
