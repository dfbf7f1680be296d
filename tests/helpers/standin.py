"""A stand-in runtime: what the engine sees of a GPU without a GPU. It costs wall time but no CPU (it
sleeps, releasing the GIL, as a GPU call does), records the batches it is fed, and returns zeros shaped
as the record declares. Used by the pipeline tests and by `benchmarks/pipeline.py`."""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from readout_sdk.runners import Lifecycle


class StandInRuntime(Lifecycle):
    """``device``: the device it claims to be (the engine feeds it with that device's batching defaults);
    ``seconds_per_item``: sleep per batch item; ``fail_at``: raise on that call (0-based), to test aborts."""

    backend = "stand-in"
    streams = 1
    providers = ("StandInRuntime",)

    def __init__(self, record: dict[str, Any], device: str = "cuda", seconds_per_item: float = 0.0,
                 fail_at: int | None = None, profile: Any = None):
        self.record = record
        self.device = device
        self.seconds_per_item = seconds_per_item
        self.fail_at = fail_at
        self.execution = {"provider": "StandInRuntime"}
        self.shapes: list[tuple[int, ...]] = []
        if profile is not None:
            self.profile = profile  # a TensorRT engine's optimization profile: the engine caps batches by it

    def run(self, names: list[str], feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        if self.fail_at is not None and len(self.shapes) == self.fail_at:
            raise RuntimeError("stand-in runtime failure")
        ids = feed["input_ids"]
        self.shapes.append(tuple(ids.shape))
        time.sleep(ids.shape[0] * self.seconds_per_item)
        by_name = {o["name"]: o for o in self.record["outputs"]}
        return [np.zeros([self._size(a, ids.shape) for a in by_name[n]["axes"]], np.float32) for n in names]

    def _size(self, axis: str, shape: tuple[int, ...]) -> int:
        if axis == "batch":
            return shape[0]
        if axis == "sequence":
            return shape[-1]
        if axis == "choices":
            return shape[1]
        out = self.record["output"]
        return int(out.get(axis) or len(out.get("labels") or [1]))

    def embedded_metadata(self) -> dict[str, str]:
        return {}

    def close(self) -> None:
        pass
