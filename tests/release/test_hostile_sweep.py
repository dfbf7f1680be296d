"""A seeded hostile sweep over a signed artifact (issue 35's "done when"): generated forgeries, each made
as an attacker with write access would (bytes changed, every sha256 recomputed, the graph's embedded record
and the layered identity rewritten to match), one to three at a time.

For every case: under the signature policy, `load` refuses it with an ArtifactError of one line (0
forgeries accepted); without a policy, `load` either refuses it the same way or the engine it returns
classifies without raising (0 unexpected failures). The default run is CI-sized (``CASES``); ``pytest -m
fuzz`` runs ``FUZZ_CASES``. ``-s`` prints the table.
Oracle: `cryptography`'s Ed25519 (the attacker holds only their own key). Model: SYNTHETIC tiny BERT
sequence classifier (shared fixture "classify")."""
from __future__ import annotations

import base64
import hashlib
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Callable

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

import readout_sdk
from readout_export.cli import main
from readout_sdk.artifact import ArtifactError
from readout_sdk.errors import SdkError
from readout_sdk.release.lifecycle import keep

CASES = 24
FUZZ_CASES = 300
TEXTS = ["a fine day", "never again"]


def _meta(root: Path) -> dict:
    return json.loads((root / "readout.json").read_text())


def _write_meta(root: Path, meta: dict) -> None:
    (root / "readout.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _cover_tracks(root: Path, record: dict | None = None) -> None:
    """Recompute what hashes and identity vouch for: the attacker's last step."""
    from readout_sdk.release.identity import compute

    meta = _meta(root)
    if record is not None:
        record["identity"] = compute({k: v for k, v in record.items() if k != "identity"}, record["identity"]["weights"])
        meta["abi"] = record
        for t in meta["targets"]:
            model = onnx.load(str(root / t["file"]))
            for p in model.metadata_props:
                if p.key == "readout.abi":
                    p.value = json.dumps(record)
            onnx.save(model, str(root / t["file"]))
    for t in meta["targets"]:
        t["sha256"] = _sha(root / t["file"])
    meta["tokenizer"]["sha256"] = _sha(root / meta["tokenizer"]["file"])
    meta["abi"]["provenance"]["tokenizer_sha256"] = meta["tokenizer"]["sha256"]
    _write_meta(root, meta)


# ---- the attacker's moves: each edits the artifact at ``root`` (rng: the seeded generator) ----------
def flip_graph_byte(root, rng, ctx):
    path = root / _meta(root)["targets"][0]["file"]
    data = bytearray(path.read_bytes())
    data[int(rng.integers(len(data)))] ^= 1 << int(rng.integers(8))
    path.write_bytes(bytes(data))
    if rng.random() < 0.8:
        _cover_tracks(root)


def scale_head_weights(root, rng, ctx):
    path = root / _meta(root)["targets"][0]["file"]
    model = onnx.load(str(path))
    init = [i for i in model.graph.initializer if len(i.dims) == 2]
    pick = init[int(rng.integers(len(init)))]
    arr = onnx.numpy_helper.to_array(pick) * np.float32(rng.uniform(-3, 3))
    pick.CopyFrom(onnx.numpy_helper.from_array(arr.astype(np.float32), pick.name))
    onnx.save(model, str(path))
    _cover_tracks(root)


def edit_labels(root, rng, ctx):
    record = _meta(root)["abi"]
    labels = list(record["output"]["labels"])
    how = rng.choice(["permute", "rename", "add"])
    if how == "permute":
        labels = labels[1:] + labels[:1]
    elif how == "rename":
        labels[int(rng.integers(len(labels)))] = "approved"
    else:
        labels.append("extra")
        if rng.random() < 0.5:
            record["outputs"][0]["shape"][-1] = len(labels)
    record["output"]["labels"] = labels
    _cover_tracks(root, record)


def edit_calibration(root, rng, ctx):
    from readout_sdk.calibration import overlay

    meta = _meta(root)
    meta["abi"] = overlay(meta["abi"], {"scheme": "readout-calibration/1", "method": "temperature",
                                        "parameters": {"temperature": float(rng.uniform(0.05, 50))},
                                        "data": {"sha256": "1" * 64, "rows": 50, "role": "calibration"}}, {})
    _write_meta(root, meta)


def edit_input_policy(root, rng, ctx):
    record = _meta(root)["abi"]
    record["input"]["max_length"] = int(rng.integers(4, 64))
    _cover_tracks(root, record)


def edit_tokenizer(root, rng, ctx):
    tok = root / _meta(root)["tokenizer"]["file"]
    doc = json.loads(tok.read_text())
    vocab = doc["model"]["vocab"]
    a, b = rng.choice(sorted(vocab), size=2, replace=False)
    vocab[a], vocab[b] = vocab[b], vocab[a]  # two tokens swap ids: other inputs to the same graph
    tok.write_text(json.dumps(doc))
    _cover_tracks(root)


def forge_evaluation(root, rng, ctx):
    release = _meta(root)["abi"]["identity"]["release_id"]
    keep(root, "evaluation", {"schema": "readout-evaluation/1", "release_id": release, "runs": [
        {"role": "test", "release_id": release, "verdict": "PASS", "gates": [{"decision": "PASS"}]}]}, {})


def forge_parity(root, rng, ctx):
    meta = _meta(root)
    keep(root, "parity", {"release_id": meta["abi"]["identity"]["release_id"], "machine": "x",
                          "target_files": {t["format"] + "-" + t["precision"]: t["sha256"] for t in meta["targets"]},
                          "checks": [{"target": "onnx-fp32", "provider": "cpu", "decision": "PASS"}]}, {})


def _sig(root: Path) -> dict:
    return json.loads((root / "readout.sig").read_text())


def drop_signature(root, rng, ctx):
    (root / "readout.sig").unlink()


def resign_with_attacker_key(root, rng, ctx):
    from readout_sdk.release.signing import read_private_key, sign_bytes

    (root / "readout.sig").unlink()
    sign_bytes(root, (root / "readout.json").read_bytes(), None, read_private_key(ctx["attacker"]))
    doc = _sig(root)
    if rng.random() < 0.5:  # and claim the trusted key's id
        doc["signatures"][0]["key_id"] = ctx["trusted_id"]
    if rng.random() < 0.5:  # or carry the trusted public key beside the attacker's signature
        doc["signatures"][0]["public_key"] = ctx["trusted_raw"]
        doc["signatures"][0]["key_id"] = ctx["trusted_id"]
    (root / "readout.sig").write_text(json.dumps(doc))


def replay_signature(root, rng, ctx):
    (root / "readout.sig").write_text(ctx["other_sig"])  # a trusted key's valid signature of another artifact


def edit_signed_payload(root, rng, ctx):
    doc = _sig(root)
    signed = doc["signatures"][0]["signed"]
    if rng.random() < 0.5:
        signed["readout.json"]["sha256"] = _sha(root / "readout.json")  # point it at the edited readout.json
    else:
        signed["release_id"] = "0" * 64
    (root / "readout.sig").write_text(json.dumps(doc))


def mangle_signature_file(root, rng, ctx):
    text = (root / "readout.sig").read_text()
    choice = rng.choice(["truncate", "types", "b64"])
    if choice == "truncate":
        (root / "readout.sig").write_text(text[: int(rng.integers(len(text)))])
    elif choice == "types":
        doc = json.loads(text)
        doc["signatures"] = [{"key_id": 3, "signed": [], "public_key": None, "signature": {}}] + doc["signatures"]
        (root / "readout.sig").write_text(json.dumps(doc))
    else:
        doc = json.loads(text)
        doc["signatures"][0]["signature"] = base64.b64encode(b"\0" * 64).decode()
        (root / "readout.sig").write_text(json.dumps(doc))


CONTENT: list[Callable] = [flip_graph_byte, scale_head_weights, edit_labels, edit_calibration, edit_input_policy,
                           edit_tokenizer, forge_evaluation, forge_parity]
SIGNATURE: list[Callable] = [drop_signature, resign_with_attacker_key, replay_signature, edit_signed_payload,
                             mangle_signature_file]


@pytest.fixture(scope="module")
def signed(shared, tmp_path_factory):
    """(signed artifact, attacker context): a trusted key, an attacker key, and a trusted signature of
    another artifact (for replays)."""
    from readout_sdk.release.signing import read_public_key

    root = tmp_path_factory.mktemp("sweep")
    art = root / "art"
    shutil.copytree(shared("classify")[1], art)
    for name in ("trusted.key", "attacker.key"):
        assert CliRunner().invoke(main, ["keygen", str(root / name)]).exit_code == 0
    other = root / "other"
    shutil.copytree(shared("classify")[1], other)
    keep(other, "bench", {"machine": "elsewhere", "rows": []}, {})  # another readout.json
    for target in (art, other):
        result = CliRunner().invoke(main, ["sign", str(target), "--key", str(root / "trusted.key")])
        assert result.exit_code == 0, result.output
    pub = read_public_key(root / "trusted.key.pub")
    ctx = {"attacker": root / "attacker.key", "trusted_id": pub.key_id,
           "trusted_raw": base64.b64encode(pub.raw).decode(), "other_sig": (other / "readout.sig").read_text()}
    return art, root / "trusted.key.pub", ctx


def _outcome(root: Path, **kwargs) -> str:
    """'refused' (one-line ArtifactError), 'loaded' (and classified), or 'UNEXPECTED ...'."""
    try:
        engine = readout_sdk.load(root, device="cpu", **kwargs)
    except ArtifactError as e:
        return "refused" if "\n" not in str(e) else "UNEXPECTED multi-line refusal"
    except SdkError as e:
        return f"UNEXPECTED {type(e).__name__}: {e}"
    except Exception as e:  # noqa: BLE001 - exactly what the sweep looks for
        return f"UNEXPECTED {type(e).__name__}: {e}"
    try:
        engine.classify(TEXTS)
    except Exception as e:  # noqa: BLE001
        return f"UNEXPECTED at classify: {type(e).__name__}: {e}"
    return "loaded"


def _sweep(signed, tmp_path, cases: int, seed: int) -> Counter:
    art, trusted, ctx = signed
    rng = np.random.default_rng(seed)
    table: Counter = Counter()
    problems = []
    for i in range(cases):
        case = tmp_path / f"case{i}"
        shutil.copytree(art, case)
        moves = [CONTENT[int(j)] for j in rng.choice(len(CONTENT), size=int(rng.integers(1, 3)), replace=False)]
        if rng.random() < 0.6:
            moves.append(SIGNATURE[int(rng.integers(len(SIGNATURE)))])
        for move in moves:
            move(case, rng, ctx)
        name = "+".join(m.__name__ for m in moves)
        under_policy = _outcome(case, trusted_keys=[trusted])
        without = _outcome(case)
        table[("policy", under_policy if not under_policy.startswith("UNEXPECTED") else "UNEXPECTED")] += 1
        table[("no policy", without if not without.startswith("UNEXPECTED") else "UNEXPECTED")] += 1
        if under_policy != "refused":
            problems.append(f"{name}: under the policy {under_policy}")
        if without.startswith("UNEXPECTED"):
            problems.append(f"{name}: without a policy {without}")
        shutil.rmtree(case)
    print(f"\nhostile sweep, {cases} generated forgeries (seed {seed}):")
    for (mode, outcome), n in sorted(table.items()):
        print(f"  {mode:<10} {outcome:<11} {n}")
    assert not problems, "\n".join(problems)
    assert table[("policy", "refused")] == cases  # 0 forgeries accepted under the signature policy
    return table


def test_the_untouched_signed_artifact_loads_under_the_policy(signed):
    art, trusted, _ = signed
    assert _outcome(art, trusted_keys=[trusted]) == "loaded"


def test_hostile_sweep_no_forgery_accepted_no_unexpected_failure(signed, tmp_path):
    _sweep(signed, tmp_path, CASES, seed=35)


@pytest.mark.fuzz
def test_hostile_sweep_fuzz(signed, tmp_path):
    _sweep(signed, tmp_path, FUZZ_CASES, seed=3535)
