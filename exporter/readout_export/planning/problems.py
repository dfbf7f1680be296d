"""Collect a manifest's problems: `build` stops at the first, `validate` reports every independent one.

A step that fails is recorded and the next step runs. A step that needs a failed one is skipped (what
it would say follows from what is already reported), and so is a step that fails with anything but a
ManifestError once a problem is on record (a consequence, not a new problem).
"""
from __future__ import annotations

from typing import Any, Callable

from readout_export.errors import ManifestError, ManifestProblems


class Problems:
    """``every``: keep going after a problem (validate); otherwise the first one is raised at once."""

    def __init__(self, every: bool = False):
        self.every = every
        self.found: list[ManifestError] = []
        self.failed: set[str] = set()

    def add(self, problem: ManifestError) -> None:
        if not self.every:
            raise problem
        for p in problem.problems if isinstance(problem, ManifestProblems) else [problem]:
            if not any(_within(p.path, q.path) for q in self.found):  # one line per JSON path and what is under it
                self.found.append(p)

    def check(self, step: Callable[[], Any], name: str = "", needs: tuple[str, ...] = ()) -> Any:
        """Run ``step`` unless a step it ``needs`` failed; record its ManifestError (or raise it, when not
        collecting every problem). Returns the step's value, None when it failed or was skipped."""
        if any(n in self.failed for n in needs):
            self.failed.add(name)
            return None
        try:
            return step()
        except ManifestError as e:
            self.add(e)
        except Exception:
            if not self.found:
                raise
        self.failed.add(name)
        return None

    def raise_any(self) -> None:
        """Raise what was found: the one problem, or all of them together."""
        if len(self.found) == 1:
            raise self.found[0]
        if self.found:
            raise ManifestProblems(self.found)


def _within(path: str, reported: str) -> bool:
    """``path`` is ``reported`` or lies under it (``$.readout.pooling`` under ``$.readout``)."""
    return path == reported or (path.startswith(reported) and path[len(reported):][:1] in (".", "["))
