"""The feed of ``Engine.run``: caller-tokenized arrays checked against the record's input axes and each
other's shape, with the inputs a graph takes besides ids and mask (`readout_sdk.roles`) defaulted."""
from __future__ import annotations

from typing import Any

import numpy as np

from readout_sdk.artifact import first_line
from readout_sdk.errors import InputRefused, WrongCall
from readout_sdk.roles import EXPANSION_INPUT, PROMPT_ROWS_INPUT


def raw_feed(record: dict[str, Any], graph_inputs: Any, input_ids: Any, attention_mask: Any,
             token_type_ids: Any = None, prompt_rows: Any = None, expansion_mask: Any = None) -> dict[str, np.ndarray]:
    """The graph feed for these arrays (``graph_inputs``: the names the graph takes); refused, naming the
    array, when one is not an integer array of the record's rank or the shapes differ."""
    names = ["input_ids", "attention_mask"]
    given = [input_ids, attention_mask]
    for name, value in (("token_type_ids", token_type_ids), (EXPANSION_INPUT, expansion_mask)):
        if name in graph_inputs:
            names.append(name)
            given.append(np.zeros_like(np.asarray(input_ids)) if value is None else value)
    counts = None
    if PROMPT_ROWS_INPUT in graph_inputs:
        counts = np.zeros(np.shape(input_ids)[:1], np.int64) if prompt_rows is None else np.asarray(prompt_rows)
        if counts.dtype.kind not in "iu" or counts.shape != np.shape(input_ids)[:1]:
            raise InputRefused(f"run(): prompt_rows must be one integer per item, shape {np.shape(input_ids)[:1]}, "
                               f"got {counts.dtype} {counts.shape}")
    axes = record["inputs"][0]["axes"]
    feed = {}
    for name, value in zip(names, given):
        try:
            array = np.asarray(value)
        except (TypeError, ValueError) as e:
            raise WrongCall(f"run(): {name} is not an array ({first_line(e)})") from None
        if array.dtype.kind not in "iub" or array.ndim != len(axes) or 0 in array.shape:
            raise InputRefused(f"run(): {name} must be a non-empty integer array of rank {len(axes)} "
                               f"({', '.join(axes)}), got {array.dtype} {array.shape}")
        feed[name] = array.astype(np.int64)
    if len({a.shape for a in feed.values()}) != 1:
        raise InputRefused(f"run(): the inputs' shapes differ: {[a.shape for a in feed.values()]}")
    if counts is not None:
        feed[PROMPT_ROWS_INPUT] = counts.astype(np.int64)
    return feed
