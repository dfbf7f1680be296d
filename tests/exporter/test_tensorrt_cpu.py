"""TensorRT and GPU paths, as far as a machine without TensorRT or CUDA can show them: the fp16 graph
(ONNX Runtime on the CPU, against sentence-transformers), the engine file format and its refusals,
profile derivation, and the clear errors where TensorRT or CUDA is missing. The tests that need
TensorRT and a CUDA device are marked ``gpu`` and report why they skip.

Models: all-MiniLM-L6-v2 (REAL) and a SYNTHETIC tiny BERT classifier (tests/helpers/synthetic.py)."""
from __future__ import annotations

import importlib.util
import json
import struct

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

import readout_sdk
from helpers.artifacts import linked_copy, list_stand_in_engine
from helpers.measured import record_error
from helpers.corpus import TEXTS
from helpers.oracles import sentence_transformers_embeddings
from readout_export.cli import main
from readout_sdk.engine_file import EngineFileError, check_compatible, read_engine, write_engine
from readout_sdk.errors import DeviceUnavailable, InputRefused
from readout_sdk.profiles import Profile, derive_profile

HAVE_TRT = importlib.util.find_spec("tensorrt") is not None


def _cuda() -> bool:
    from readout_sdk.runners import gpu_available

    return gpu_available()


gpu = pytest.mark.skipif(not (HAVE_TRT and _cuda()),
                         reason="needs TensorRT and a CUDA device (tensorrt installed: "
                                f"{HAVE_TRT}; CUDA provider: {_cuda()})")


def test_fp16_graph_keeps_fragile_ops_fp32_and_parity(shared):
    from readout_export.targets.fp16 import FP32_OPS

    model, artifact = shared("fp16")
    meta = json.loads((artifact / "readout.json").read_text())
    assert {"onnx-fp16"} <= {f"{t['format']}-{t['precision']}" for t in meta["targets"]}
    g = onnx.load(str(artifact / "model.onnx-fp16.onnx"))
    types = {i.name: i.data_type for i in g.graph.initializer}
    matmul_weights = [types[x] for n in g.graph.node if n.op_type == "MatMul" for x in n.input if x in types]
    assert matmul_weights and set(matmul_weights) == {onnx.TensorProto.FLOAT16}
    fragile = [n for n in g.graph.node if n.op_type in ("LayerNormalization", "Softmax", "ReduceL2", "ReduceSum")]
    assert fragile, "the graph should contain LayerNorm / softmax / reductions"
    value_types = {v.name: v.type.tensor_type.elem_type for v in list(g.graph.value_info) + list(g.graph.input)
                   + list(g.graph.output)}
    checked = 0
    for node in fragile:  # no fp16 tensor flows into them (explicit Casts to fp32 in front)
        known = [value_types[x] for x in node.input[:1] if x in value_types]
        checked += len(known)
        assert all(t != onnx.TensorProto.FLOAT16 for t in known), node.name
    assert checked >= len(fragile) // 2
    assert "LayerNormalization" in FP32_OPS and "Softmax" in FP32_OPS
    engine = readout_sdk.load(artifact, precision="fp16", device="cpu")
    got = engine.embed(TEXTS).vectors
    oracle = np.stack([o["embeddings"] for o in sentence_transformers_embeddings(model, TEXTS)])
    cos = (got * oracle).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(oracle, axis=1))
    record_error("fp16 graph on ONNX Runtime CPU vs sentence-transformers (REAL MiniLM)", 1 - float(cos.min()),
                 "1 - min cosine")
    assert 0.999 <= cos.min() < 1 - 1e-8  # within the fp16 budget, and fp16 weights really ran
    # the readout tail (pooling, L2) stayed fp32: unit norm to fp32 precision, not fp16's 1e-3
    assert np.abs(np.linalg.norm(got, axis=1) - 1).max() < 1e-5


def test_engine_file_round_trip_and_refusals(tmp_path):
    header = {"abi": {"family": "embedding"}, "target": "tensorrt-fp16", "tensorrt": "10.3.0", "gpu": "Orin",
              "compute_capability": "8.7", "profiles": [Profile((1, 8, 16), (1, 64, 128)).to_json()]}
    plan = bytes(range(256)) * 40
    path = write_engine(tmp_path / "model.tensorrt-fp16.engine", header, plan)
    assert path.with_suffix(".plan").read_bytes() == plan  # the raw plan for Triton / trtexec
    raw = path.read_bytes()
    assert raw[:8] == b"RDXTRT\x00\x01" and struct.unpack_from("<I", raw, 8)[0] == 1
    back = read_engine(path)
    assert back.plan == plan and back.header["abi"] == {"family": "embedding"}
    assert back.header["plan_bytes"] == len(plan)
    check_compatible(back.header, "10.3.0", "8.7")  # same TensorRT and GPU: accepted
    with pytest.raises(DeviceUnavailable, match=r"TensorRT 10.3.0 for compute capability 8.7 \(Orin\).*"
                                                r"TensorRT 11.0.1 and compute capability 9.0.*readout-export compile"):
        check_compatible(back.header, "11.0.1", "9.0")
    with pytest.raises(DeviceUnavailable, match="compute capability 8.9"):
        check_compatible(back.header, "10.3.0", "8.9")
    (tmp_path / "cut.engine").write_bytes(raw[:-10])
    with pytest.raises(EngineFileError, match="does not match its header's sha256"):
        read_engine(tmp_path / "cut.engine")
    flipped = bytearray(raw)
    flipped[-1] ^= 1
    (tmp_path / "flip.engine").write_bytes(bytes(flipped))
    with pytest.raises(EngineFileError, match="changed or cut"):
        read_engine(tmp_path / "flip.engine")
    with pytest.raises(EngineFileError, match="not a readout engine file"):
        read_engine(path.with_suffix(".plan"))
    newer = bytearray(raw)
    newer[8:12] = struct.pack("<I", 2)
    (tmp_path / "v2.engine").write_bytes(bytes(newer))
    with pytest.raises(EngineFileError, match="format version 2; this SDK reads version 1"):
        read_engine(tmp_path / "v2.engine")


def test_profiles_derive_check_and_refuse():
    p = derive_profile(None, 256, "embedding")
    assert (p.batch, p.sequence, p.choices) == ((1, 32, 128), (1, 128, 256), None)
    assert p.input_shapes() == ((1, 1), (32, 128), (128, 256))
    short = derive_profile({"batch": [1, 4, 8]}, 64, "sequence_classification")
    assert short.sequence == (1, 64, 64) and short.batch == (1, 4, 8)
    mc = derive_profile(None, 64, "multiple_choice")
    assert mc.input_shapes() == ((1, 1, 1), (32, 4, 64), (128, 8, 64))
    p.check((128, 256))
    with pytest.raises(InputRefused, match=r"batch 129 is outside .*batch 1\.\.128 \(opt 32\)"):
        p.check((129, 10))
    with pytest.raises(InputRefused, match=r"sequence 300 is outside"):
        p.check((2, 300))
    with pytest.raises(ValueError, match="max 512 exceeds max_length 256"):
        derive_profile({"sequence": [1, 128, 512]}, 256, "embedding")
    with pytest.raises(ValueError, match="1 <= min <= opt <= max"):
        derive_profile({"batch": [8, 4, 16]}, 256, "embedding")
    assert Profile.from_json(mc.to_json()) == mc


@pytest.mark.skipif(HAVE_TRT, reason="TensorRT is installed here: the refusal cannot be shown")
def test_compile_without_tensorrt_is_a_clear_error(shared):
    artifact = shared("fp16")[1]
    result = CliRunner().invoke(main, ["compile", str(artifact), "--target", "tensorrt-fp16"])
    assert result.exit_code == 2, result.output
    assert "TensorRT is not installed" in result.stderr and "readout-export[tensorrt]" in result.stderr
    assert "Traceback" not in result.output
    meta = json.loads((artifact / "readout.json").read_text())
    assert not any(t["format"] == "tensorrt" for t in meta["targets"])  # nothing half-written


def test_compile_rejects_unknown_targets(shared):
    artifact = shared("fp16")[1]
    result = CliRunner().invoke(main, ["compile", str(artifact), "--target", "tensorrt-fp64"])
    assert result.exit_code == 2 and "tensorrt-fp64" in result.stderr and "tensorrt-fp16" in result.stderr


@pytest.mark.skipif(_cuda(), reason="this machine has CUDA: the refusal cannot be shown")
def test_cuda_without_a_gpu_is_refused(shared):
    with pytest.raises(DeviceUnavailable, match=r"device 'cuda' cannot be used: .*readout-export\[gpu\]"):
        readout_sdk.load(shared("fp16")[1], device="cuda")


@pytest.mark.gpu
@gpu
def test_tensorrt_engine_matches_fp32_onnx_on_gpu(shared, tmp_path):
    """Runs only where TensorRT and CUDA exist: compile, load on CUDA, compare with the fp32 graph."""
    import shutil

    art = tmp_path / "a"
    shutil.copytree(shared("fp16")[1], art)
    result = CliRunner().invoke(main, ["compile", str(art), "--target", "tensorrt-fp16"])
    assert result.exit_code == 0, result.output
    trt = readout_sdk.load(art, device="cuda", target="tensorrt-fp16")
    ref = readout_sdk.load(art, device="cpu", precision="fp32")
    cos = (trt.embed(TEXTS).vectors * ref.embed(TEXTS).vectors).sum(1)
    assert cos.min() >= 0.999


def test_parity_gates_fp16_and_reports_uncompiled_engines(shared):
    from readout_export.reference import check_parity
    from readout_parity import run_parity

    artifact = shared("fp16")[1]
    report = check_parity(artifact, widths=(1, 7))
    checks = {(c.target, c.provider, c.metric): c for c in report.checks}
    cos = checks[("onnx-fp16", "CPUExecutionProvider", "min_cosine")]
    assert cos.decision == "PASS" and cos.requirement == ">= 0.999" and 0.999 <= cos.measured < 1 - 1e-8
    pending = checks[("tensorrt-fp16", "TensorRT", "all")]
    assert pending.decision == "NOT_EVALUATED" and "readout-export compile" in pending.reason
    # the check a machine without PyTorch runs after compile: against the artifact's own fp32 graph
    alone = run_parity(artifact, widths=(1, 7), only=["onnx-fp16"])  # no reference given: the fp32 graph
    assert {c.target for c in alone.checks} == {"onnx-fp16"}
    assert all("onnx-fp32 graph" in c.reference for c in alone.checks if c.decision != "NOT_EVALUATED")
    assert all(c.decision in ("PASS", "NOT_EVALUATED") for c in alone.checks)


def test_compile_scale_out_and_the_sdk_never_import_torch():
    import subprocess
    import sys

    code = ("import sys; sys.modules['torch'] = None; sys.modules['transformers'] = None; "
            "import readout_export.targets.compile, readout_export.cli, readout_sdk.runners, readout_sdk.engine_file, "
            "readout_parity.harness, readout_export.triton_repo, readout_export.cli.scale, readout_sdk.serving.serve, "
            "readout_sdk.serving.ray, readout_sdk.serving.records, readout_sdk.serving.triton_model; print('ok')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_a_listed_engine_without_tensorrt_is_refused_clearly(shared, tmp_path):
    """An artifact that lists a compiled engine (written here with a stand-in plan): the SDK verifies its
    hash, and on a machine without TensorRT says what to install; parity reports NOT_EVALUATED."""
    from readout_parity.harness import run_parity

    art = tmp_path / "a"
    linked_copy(shared("fp16")[1], art)
    list_stand_in_engine(art, Profile((1, 16, 64), (1, 128, 256)))
    if not HAVE_TRT:
        with pytest.raises(DeviceUnavailable, match=r"tensorrt-fp16 runs on tensorrt, which is not installed: "
                                                    r"pip install 'readout-export\[tensorrt\]'"):
            readout_sdk.load(art, target="tensorrt-fp16")
    assert readout_sdk.load(art).target.name == "onnx-fp32"  # on the CPU the engine is never picked by itself
    with pytest.raises(DeviceUnavailable, match="tensorrt-fp16 cannot run on device 'cpu'"):
        readout_sdk.load(art, device="cpu", target="tensorrt-fp16")
    from readout_parity.report import keep_in_artifact
    from readout_sdk.backend import machine_id

    earlier = {"target": "onnx-fp32", "provider": "CPUExecutionProvider", "metric": "min_cosine",
               "requirement": ">= 0.99999", "measured": 1.0, "decision": "PASS", "reference": "eager", "reason": ""}
    release = json.loads((art / "readout.json").read_text())["abi"]["identity"]["release_id"]
    # an earlier run's report, kept as parity keeps it (listed: an unlisted file's decisions are never carried over)
    from readout_sdk.release.lifecycle import keep

    keep(art, "parity", {"machine": machine_id(), "release_id": release, "checks": [earlier]}, {})
    report = run_parity(art, widths=(1,), only=["tensorrt-fp16"])
    (check,) = report.checks
    assert check.decision == "NOT_EVALUATED" and check.provider == "TensorRT" and check.reason
    keep_in_artifact(report, only=["tensorrt-fp16"])  # what compile does: earlier decisions stay
    kept = json.loads((art / "parity.json").read_text())
    assert [c["target"] for c in kept["checks"]] == ["onnx-fp32", "tensorrt-fp16"]
    result = CliRunner().invoke(main, ["inspect", str(art)])
    assert result.exit_code == 0 and "tensorrt-fp16" in result.stdout and "TensorRT 10.3.0 on Orin" in result.stdout
    (art / "model.tensorrt-fp16.engine").write_bytes(b"changed")
    # load() reads only the graph it runs, so the CPU target still loads; opening the artifact whole
    # (what inspect, verify and parity do) refuses the changed engine by name
    assert readout_sdk.load(art).target.name == "onnx-fp32"
    with pytest.raises(readout_sdk.ArtifactError, match="model.tensorrt-fp16.engine: sha256"):
        readout_sdk.open_artifact(art)
    result = CliRunner().invoke(main, ["inspect", str(art)])
    assert result.exit_code != 0 and "model.tensorrt-fp16.engine: sha256" in result.output
