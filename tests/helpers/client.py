"""An independent client: only onnxruntime, tokenizers and numpy, reading the ABI record from the
ONNX file itself. It proves a graph file plus its tokenizer is enough to get correct outputs."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer


class GraphClient:
    """Runs one exported graph on texts, pairs or (question, choices) items."""

    def __init__(self, graph: Path):
        self.session = ort.InferenceSession(str(graph), providers=["CPUExecutionProvider"])
        self.record = json.loads(self.session.get_modelmeta().custom_metadata_map["readout.abi"])
        self.tokenizer = Tokenizer.from_file(str(graph.parent / self.record["input"]["tokenizer_file"]))
        self.pad = self.record["input"]["pad_token_id"]

    def _encode(self, item: Any):
        if isinstance(item, str):
            return self.tokenizer.encode(item)
        return self.tokenizer.encode(item[0], item[1])

    def _pad(self, encs: list, side: str, width: int, pad_id: int) -> dict[str, np.ndarray]:
        n = len(encs)
        ids = np.full((n, width), pad_id, np.int64)
        mask = np.zeros((n, width), np.int64)
        types = np.zeros((n, width), np.int64)
        for i, e in enumerate(encs):
            length = len(e.ids)
            cols = slice(width - length, width) if side == "left" else slice(0, length)
            ids[i, cols], mask[i, cols], types[i, cols] = e.ids, 1, e.type_ids
        return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}

    def run(self, items: Sequence[Any], side: str, batch: int, pad_id: int | None = None) -> list[dict[str, np.ndarray]]:
        """Outputs per item, in input order; per-row outputs keep only the rows the mask marks valid.

        ``pad_id`` overrides the id written into padding rows (the mask alone must mark padding)."""
        results: list[dict[str, np.ndarray]] = []
        names = [o["name"] for o in self.record["outputs"]]
        inputs = [i["name"] for i in self.record["inputs"]]
        choices = self.record["family"] == "multiple_choice"
        for start in range(0, len(items), batch):
            chunk = items[start:start + batch]
            if choices:
                encs = [self._encode((q, c)) for q, cs in chunk for c in cs]
                k = len(chunk[0][1])
            else:
                encs = [self._encode(x) for x in chunk]
            width = max(len(e.ids) for e in encs)
            feed = self._pad(encs, side, width, self.pad if pad_id is None else pad_id)
            if choices:
                feed = {key: v.reshape(len(chunk), k, width) for key, v in feed.items()}
            outs = self.session.run(names, {name: feed[name] for name in inputs})
            for spec, value in zip(self.record["outputs"], outs):
                assert value.dtype == np.dtype(spec["dtype"]), (spec["name"], value.dtype)
                if "sequence" in spec["axes"]:  # the ABI: rows with attention_mask 0 carry 0
                    assert not value[feed["attention_mask"] == 0].any(), f"{spec['name']}: padding rows not 0"
            for i in range(len(chunk)):
                row: dict[str, np.ndarray] = {}
                for spec, value in zip(self.record["outputs"], outs):
                    v = value[i]
                    if "sequence" in spec["axes"]:
                        v = v[feed["attention_mask"][i].astype(bool)]
                    row[spec["name"]] = v
                results.append(row)
        return results
