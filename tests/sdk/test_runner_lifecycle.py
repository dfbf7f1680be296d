"""Every runner kind this CPU machine can run shares one lifecycle (issue 46 point 7): a context manager,
``close()`` idempotent, and every call after it refused with the typed `readout_sdk.errors.Closed` (an
SdkError and a RuntimeError) instead of whatever a released runtime happens to raise."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from readout_sdk.artifact import open_artifact
from readout_sdk.errors import Closed, SdkError
from readout_sdk.runners import Runner
from readout_sdk.targets import open_runner

KINDS = ["onnxruntime", "openvino", "eager"]


def _open(kind: str, art: Any) -> Any:
    if kind == "eager":
        pytest.importorskip("torch")
        from readout_export.reference import eager_reference

        return eager_reference(art).runner
    if kind == "openvino":
        pytest.importorskip("openvino")
    return open_runner(art.path, art.target("onnx", "fp32"), kind, "cpu", record=art.record)


def _feed(record: dict[str, Any]) -> dict[str, np.ndarray]:
    """Two rows of three attended tokens, for every input the record declares."""
    return {i["name"]: (np.ones((2,), np.int64) if i["axes"] == ["batch"] else
                        np.array([[2, 5, 3], [2, 6, 3]], np.int64) if i["name"] == "input_ids" else
                        np.ones((2, 3), np.int64) if i["name"] == "attention_mask" else np.zeros((2, 3), np.int64))
            for i in record["inputs"]}


@pytest.mark.parametrize("kind", KINDS)
def test_a_runner_closes_once_and_refuses_every_call_after(shared, kind):
    art = open_artifact(shared("classify")[1])
    names = [o["name"] for o in art.record["outputs"]]
    feed = _feed(art.record)
    runner = _open(kind, art)
    assert isinstance(runner, Runner)
    with runner as entered:
        assert entered is runner and not runner.closed
        out = runner.run(names, feed)
        assert [o.shape[0] for o in out] == [2] * len(names) and all(np.isfinite(o).all() for o in out)
        runner.embedded_metadata()
    assert runner.closed  # leaving the block closed it
    runner.close()  # and closing again is fine
    for call in (lambda: runner.run(names, feed), runner.embedded_metadata):
        with pytest.raises(Closed, match=r"runner is closed; open a new one") as caught:
            call()
        assert isinstance(caught.value, SdkError) and isinstance(caught.value, RuntimeError)


def test_a_runner_closes_when_its_block_raises(shared):
    art = open_artifact(shared("classify")[1])
    with pytest.raises(ZeroDivisionError):
        with _open("onnxruntime", art) as runner:
            1 / 0
    assert runner.closed
    with pytest.raises(Closed):
        runner.run([o["name"] for o in art.record["outputs"]], _feed(art.record))
