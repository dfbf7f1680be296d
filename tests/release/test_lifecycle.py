"""Runners share one protocol (run, metadata, close); engines close, also as context managers; the
TensorRT runner deactivates what it activated (exercised with a stand-in for Polygraphy's TrtRunner:
no machine here has TensorRT)."""
from __future__ import annotations

import threading

import pytest

import readout_sdk
from readout_sdk.errors import WrongCall
from readout_sdk.runners import OpenVINORunner, Runner, TensorRTRunner


def test_engine_closes_its_runner_and_refuses_calls_after(shared):
    art = shared("classify")[1]
    with readout_sdk.load(art) as engine:
        first = engine.classify(["a fine day"])[0]
        assert isinstance(engine.runner, Runner)
        runner = engine.runner
    assert runner.session is None  # the ONNX Runtime session was released
    with pytest.raises(WrongCall, match="closed"):
        engine.classify(["a fine day"])
    engine.close()  # twice is fine
    again = readout_sdk.load(art)
    assert again.classify(["a fine day"])[0] == first
    again.close()


def test_openvino_engine_closes(shared):
    pytest.importorskip("openvino")
    engine = readout_sdk.load(shared("classify")[1], backend="openvino")
    assert isinstance(engine.runner, OpenVINORunner) and isinstance(engine.runner, Runner)
    engine.close()
    assert engine.runner.compiled is None


def test_eager_reference_is_a_runner(shared):
    from readout_export.reference import EagerRunner, eager_reference
    from readout_sdk.artifact import open_artifact

    reference = eager_reference(open_artifact(shared("classify")[1]))
    assert isinstance(reference.runner, EagerRunner) and isinstance(reference.runner, Runner)
    reference.close()
    assert reference.runner.graph is None


class _StandInTrt:
    """Polygraphy's TrtRunner surface that TensorRTRunner uses: is_active, infer, deactivate."""

    def __init__(self):
        self.is_active, self.deactivated = True, 0

    def deactivate(self):
        self.is_active = False
        self.deactivated += 1


def test_tensorrt_runner_deactivates_what_it_activated():
    runner = TensorRTRunner.__new__(TensorRTRunner)  # the constructor needs TensorRT and a GPU
    trt = _StandInTrt()
    runner._runner, runner._lock = trt, threading.Lock()
    runner.close()
    runner.close()
    assert trt.deactivated == 1 and runner._runner is None
