"""The thin SDK in a fresh virtual environment with only the base install: it loads an artifact and
returns typed results, and torch / transformers are not even importable there."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import sys, importlib.util
import readout_sdk
engine = readout_sdk.load(sys.argv[1])
result = engine.classify(["a fine day", "a terrible day"], top_k=2)
assert [r.label for r in result] and all(r.score_kind == "probability" for r in result)
missing = [m for m in ("torch", "transformers", "sentence_transformers", "onnx") if importlib.util.find_spec(m) is None]
print(result[0].label, sorted(missing))
"""


def test_base_install_gives_typed_results_without_torch(shared, tmp_path):
    artifact = shared("classify")[1]
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", str(ROOT)], capture_output=True, text=True,
                          timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    run = subprocess.run([str(python), "-c", SCRIPT, str(artifact)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    label, missing = run.stdout.split(" ", 1)
    assert label in ("negative", "neutral", "positive")
    assert missing.strip() == str(sorted(["torch", "transformers", "sentence_transformers", "onnx"]))
