"""Numerically stable score functions (float64 inside, float32 out)."""
from __future__ import annotations

import numpy as np

from readout_sdk.errors import AbiError


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    z = np.asarray(x, np.float64)
    z = np.exp(z - z.max(axis=axis, keepdims=True))
    return z / z.sum(axis=axis, keepdims=True)


def sigmoid(x: np.ndarray) -> np.ndarray:
    z = np.asarray(x, np.float64)
    return np.where(z >= 0, 1.0 / (1.0 + np.exp(-np.abs(z))), np.exp(-np.abs(z)) / (1.0 + np.exp(-np.abs(z))))


def apply(score_type: str, logits: np.ndarray) -> np.ndarray:
    """Turn raw logits into the record's declared score type."""
    if score_type == "softmax":
        return softmax(logits)
    if score_type == "sigmoid":
        return sigmoid(logits)
    if score_type in ("logit", "identity"):
        return np.asarray(logits, np.float64)
    raise AbiError(f"unknown score type {score_type!r}")


def argmax_first(x: np.ndarray) -> int:
    """Argmax with ties going to the lowest index (numpy's documented behaviour, stated here)."""
    return int(np.argmax(x))
