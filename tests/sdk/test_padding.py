"""Why positions must come from the mask: on the REAL all-MiniLM-L6-v2, a left-padded batch with
transformers' default position ids drifts away from each sentence encoded alone, while the exported
graph (positions from the mask) does not. This also shows the family tests can fail."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import torch

from helpers import synthetic
from helpers.client import GraphClient
from helpers.corpus import TEXTS


def _mean_pool(h, mask):
    m = mask.unsqueeze(-1).float()
    v = (h * m).sum(1) / m.sum(1)
    return torch.nn.functional.normalize(v, dim=-1).numpy()


def test_left_padding_needs_mask_positions(shared):
    from transformers import AutoModel, AutoTokenizer

    path = synthetic.minilm_path()
    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModel.from_pretrained(str(path)).eval()
    texts = [TEXTS[0], TEXTS[2], TEXTS[5]]
    with torch.no_grad():
        alone = np.stack([_mean_pool(model(**tok(t, return_tensors="pt")).last_hidden_state,
                                     tok(t, return_tensors="pt")["attention_mask"])[0] for t in texts])
        tok.padding_side = "left"
        batch = tok(texts, padding=True, return_tensors="pt")
        naive = _mean_pool(model(**batch).last_hidden_state, batch["attention_mask"])
    naive_cos = (alone * naive).sum(-1)
    assert naive_cos.min() < 0.9, naive_cos  # default position ids shift under left padding

    # the session's MiniLM artifact (tests/helpers/sdk_fixtures.py "embedding": this model, family embedding,
    # max_length 256; its fp32 graph is what a build of that manifest alone writes, see
    # tests/release/test_identity.py): no second export of the same graph
    model, artifact = shared("embedding")
    assert model == path and json.loads((artifact / "readout.json").read_text())["abi"]["input"]["max_length"] == 256
    client = GraphClient(artifact / "model.onnx-fp32.onnx")
    graph = np.stack([r["embeddings"] for r in client.run(texts, "left", 3)])
    assert (alone * graph).sum(-1).min() > 0.99999


def test_installed_command_exit_codes(tmp_path):
    """The console script itself: --help works; a bad manifest is exit 2 with one line and no traceback."""
    found = shutil.which("readout-export", path=os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"])
    assert found, "the readout-export console script is not installed"
    exe = [found]
    assert subprocess.run(exe + ["--help"], capture_output=True).returncode == 0
    (tmp_path / "m.json").write_text(json.dumps({"schema": "readout-export/manifest/1", "model": "nowhere",
                                                 "family": "embedding", "output_dir": "out"}))
    done = subprocess.run(exe + ["validate", str(tmp_path / "m.json")], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip().startswith("error: $.model: model directory not found")
    assert "Traceback" not in done.stderr and done.stderr.strip().count("\n") == 0
