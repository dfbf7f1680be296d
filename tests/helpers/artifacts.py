"""Artifact copies and edits tests make on the session's shared artifacts."""
from __future__ import annotations

import json
from pathlib import Path


def linked_copy(src: Path, dst: Path) -> Path:
    """A copy of an artifact whose large graph files are hard links (read-only use) and whose small files
    (readout.json, reports) are real copies, so a test may edit them without touching the shared artifact."""
    import os
    import shutil

    def link_or_copy(a: str, b: str) -> None:
        if a.endswith((".onnx", ".engine", ".plan")):
            try:
                os.link(a, b)
                return
            except OSError:  # another file system: a real copy
                pass
        shutil.copy2(a, b)

    shutil.copytree(src, dst, copy_function=link_or_copy)
    return dst


def list_stand_in_engine(art: Path, profile, plan: bytes = b"not a real plan", target: str = "tensorrt-fp16") -> None:
    """List a compiled TensorRT engine in ``art`` (a stand-in plan: TensorRT is not here), as compile would."""
    from readout_sdk.artifact import sha256_file
    from readout_sdk.engine_file import write_engine

    meta = json.loads((art / "readout.json").read_text())
    file = f"model.{target}.engine"
    built = {"tensorrt": "10.3.0", "compute_capability": "8.7", "gpu": "Orin"}
    write_engine(art / file, {"abi": meta["abi"], "target": target, "profiles": [profile.to_json()], **built}, plan)
    precision = target.split("-")[1]
    meta["targets"] = [t for t in meta["targets"] if not (t["format"] == "tensorrt" and t["precision"] == precision)]
    meta["targets"].append({"format": "tensorrt", "precision": precision, "runtime": "tensorrt", "file": file,
                            "sha256": sha256_file(art / file), "profile": profile.to_json(), **built})
    meta.pop("compile", None)
    (art / "readout.json").write_text(json.dumps(meta))
