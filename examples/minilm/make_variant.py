"""A second MiniLM release to compare with `readout-export diff`: the same weights and tokenizer without
the Normalize module (so its vectors are not unit length). Writes models/all-MiniLM-L6-v2-no-normalize
(links to the real model's files, a modules.json without Normalize) and manifest-no-normalize.json.
Run prepare.py first. Nothing is downloaded."""
import json
from pathlib import Path

here = Path(__file__).resolve().parent
real = here / "models" / "all-MiniLM-L6-v2"
if not real.exists():
    raise SystemExit(f"{real} is missing: run python {here / 'prepare.py'} first")
variant = here / "models" / "all-MiniLM-L6-v2-no-normalize"
variant.mkdir(exist_ok=True)
for path in real.resolve().rglob("*"):
    rel = path.relative_to(real.resolve())
    dst = variant / rel
    if path.is_dir():
        dst.mkdir(parents=True, exist_ok=True)
    elif rel != Path("modules.json") and not dst.exists():
        dst.symlink_to(path)
modules = [m for m in json.loads((real / "modules.json").read_text()) if not m["type"].endswith("Normalize")]
(variant / "modules.json").write_text(json.dumps(modules, indent=2) + "\n")
manifest = json.loads((here / "manifest.json").read_text())
manifest.update(model=f"models/{variant.name}", output_dir="dist/minilm-no-normalize",
                targets=[{"format": "onnx", "precision": "fp32"}, {"format": "onnx", "precision": "int8"}])
manifest["readout"] = {**manifest.get("readout", {}), "normalize": "none"}
(here / "manifest-no-normalize.json").write_text(json.dumps(manifest, indent=2) + "\n")
print(here / "manifest-no-normalize.json")
