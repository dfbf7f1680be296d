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


class ExportRefused(ReadoutExportError, ValueError):
    """What a build was asked to make names something this exporter cannot build (a pooling mode or readout
    stage a family or plugin declares, an adapter form, a model class transformers lacks): exit 2. A
    ValueError for callers that caught the plain one."""

    exit_code = 2


class NoModelClass(ExportRefused, KeyError):
    """transformers (or the model directory's code) has no class for this architecture under the auto
    class the family needs; a KeyError, as the lookup's callers expect. Printed as its message (KeyError's
    own ``str`` would quote it)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class GraphError(BuildError, ValueError):
    """A graph a build step made or was handed that the next step cannot work on (a tensor two nodes
    write, nodes asked for that the graph does not have): the build fails, exit 1."""


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
