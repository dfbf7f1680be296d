"""Devices an engine runs on, with the batching each is fed by default: the one place the SDK, serving and
the bench read them from. A call's ``batch_size`` and ``load(max_batch_tokens=..., prefetch=...)`` override.
"""
from __future__ import annotations

from dataclasses import dataclass

from readout_sdk.errors import UnknownName


@dataclass(frozen=True)
class Device:
    """One device and how a call feeds it unless told otherwise."""

    name: str
    batch_size: int        # items per batch
    max_batch_tokens: int  # padded tokens per batch (batch items x the batch's longest item)
    prefetch: int          # items prepared (tokenized, padded) ahead of the runtime; 0: prepared when needed
    why: str
    # what one more runtime call costs, in padded tokens: batches are planned to the fewest padded tokens plus
    # this much per call (`readout_sdk.batching.plan_batches`); 0: batches filled to the budget, in length order
    call_tokens: int = 0


DEVICES: dict[str, Device] = {d.name: d for d in (
    Device("cpu", 32, 2048, 0,
           "batch 32 and 2048 padded tokens were best or near it on 2-core x86 (docs/sdk.md); the runtime's "
           "threads use every core, so preparing the next batch beside it only competes for them; a CPU runs "
           "padding as dearly as text, and a call costs what 9 to 16 tokens do (1.0-1.4 ms against 0.09-0.11 "
           "ms a token, MiniLM on 2-core x86, 2026-12-07; 16 at typical lengths), so a call's texts are cut "
           "where padding costs more",
           call_tokens=16),
    Device("cuda", 256, 65536, 2048,
           "a GPU needs large batches to fill (batch 256, 65,536 tokens: 1.8x the CPU defaults' throughput "
           "on an H200, issue 32) and idles while the CPU tokenizes unless batches are prepared ahead"),
)}

CHOICES = ("auto", *DEVICES)  # what load(device=...) accepts: "auto" is CUDA where ONNX Runtime offers it


def device(name: str) -> Device:
    """The device called ``name`` (an `UnknownName`, a KeyError, names the known ones)."""
    try:
        return DEVICES[name]
    except KeyError:
        raise UnknownName(f"unknown device {name!r}; known: {', '.join(DEVICES)}") from None
