"""Errors the exporter reports to users; each carries the exit code the CLI returns."""
from __future__ import annotations


class ReadoutExportError(Exception):
    """Base class: a problem stated in one line, without a traceback."""

    exit_code = 1


class ManifestError(ReadoutExportError):
    """The manifest (or the model directory it names) is unusable: exit 2, nothing written."""

    exit_code = 2

    def __init__(self, path: str, message: str):
        self.path = path
        self.message = message
        super().__init__(f"{path}: {message}")


class BuildError(ReadoutExportError):
    """The build itself failed (export, verification): exit 1, nothing left that looks built."""

    exit_code = 1
