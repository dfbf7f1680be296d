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


class ManifestProblems(ManifestError):
    """Several independent problems in one manifest (what `validate` reports, one line each); reads as
    the first of them wherever a single ManifestError is expected."""

    def __init__(self, problems: list[ManifestError]):
        self.problems = problems
        super().__init__(problems[0].path, problems[0].message)

    def lines(self) -> list[str]:
        return [str(p) for p in self.problems]


class SetupError(ReadoutExportError):
    """This machine lacks what the command needs (an extra, a writable location): exit 2, one line naming the fix."""

    exit_code = 2
