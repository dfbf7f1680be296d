"""Where a command may write an artifact (or a Triton repository): one check for `validate`, `build`,
`calibrate` and `triton`, so that validate refuses exactly what the writers would.

A destination is refused when replacing it could destroy something that is not an artifact: the file
system root or a top-level directory, the home directory, a directory holding the manifest or the model,
an existing file, a non-empty directory that is not an artifact, a path under a regular file, or a
directory the account cannot write in. An existing artifact is replaced only with ``force``.
"""
from __future__ import annotations

import os
from pathlib import Path

from readout_sdk.artifact import ARTIFACT_FILE, foreign_files

from readout_export.errors import ManifestError


def check_destination(out: Path, force: bool | None, keep_safe: dict[str, Path], where: str = "$.output_dir",
                      marker: str = ARTIFACT_FILE) -> list[str]:
    """Refuse ``out`` (an absolute, resolved path) for the reasons in the module docstring; return notes.

    ``force=None`` (validate): an existing artifact is a note, since `build --force` may replace it.
    ``keep_safe``: what must survive the write (name -> path: the manifest, the model directory).
    ``marker``: the file that makes an existing directory one of ours (readout.json, or a Triton repo's).
    """
    if out == Path(out.anchor) or out.parent == Path(out.anchor):  # existing or not: a top-level directory
        raise ManifestError(where, f"{out} is {'a system' if out.exists() else 'a new top-level'} directory; "
                                   "choose a directory of its own for the artifact")
    home = Path.home().resolve()
    if out == home:
        raise ManifestError(where, f"{out} is the home directory; choose a directory of its own")
    for what, path in keep_safe.items():
        if out == path or out in path.parents:
            raise ManifestError(where, f"{out} holds the {what} ({path}); replacing it would delete it")
    for parent in out.parents:  # a path under a regular file can never be created
        if parent.exists():
            if not parent.is_dir():
                raise ManifestError(where, f"{out} is under {parent}, which is a file")
            if not os.access(parent, os.W_OK | os.X_OK):
                raise ManifestError(where, f"cannot write in {parent} (permission denied)")
            break
    notes: list[str] = []
    if out.exists():
        if not out.is_dir():
            raise ManifestError(where, f"{out} exists and is not a directory")
        if any(out.iterdir()):
            _ours_alone(out, marker, where)
        if force is False:
            raise ManifestError(where, f"{out} already exists; pass --force to replace it")
        if force is None:
            notes.append(f"{out} exists already: build needs --force to replace it")
    return notes


def _ours_alone(out: Path, marker: str, where: str) -> None:
    """Refuse a non-empty ``out`` unless this tool positively wrote it and nothing else is in it: for an
    artifact, a readable readout.json and no file it does not account for (`readout_sdk.artifact.
    foreign_files`: a user's notes, a kept report set aside, a subdirectory); for a Triton repository,
    its marker. Replacing it would delete whatever is not ours, and a user's file is never deleted."""
    if marker != ARTIFACT_FILE:
        if not (out / marker).is_file():
            raise ManifestError(where, f"{out} holds files but is not one this tool wrote; refusing to replace it "
                                       "even with --force")
        return
    foreign = foreign_files(out)
    if foreign is None:
        raise ManifestError(where, f"{out} holds files but is not an artifact (no readable {ARTIFACT_FILE}); "
                                   "refusing to replace it even with --force")
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise ManifestError(where, f"{out} is an artifact but also holds {shown}, which the artifact does not "
                                   "list; replacing it would delete them: move them out first (even --force "
                                   "replaces only what this tool wrote)")
