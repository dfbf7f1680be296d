"""The tables of measured errors and invalidations the terminal summary prints (tests/conftest.py)."""
from __future__ import annotations

MEASURED: dict[str, tuple[float, str]] = {}


def record_error(case: str, value: float, note: str = "") -> None:
    """Remember the largest error measured for a case (shown in the terminal summary)."""
    old = MEASURED.get(case, (0.0, note))
    MEASURED[case] = (max(old[0], value), note or old[1])


INVALIDATION: dict[str, dict] = {}


def record_invalidation(case: str, doc: dict) -> None:
    """Remember what `readout-export diff` said a change invalidates (shown in the terminal summary)."""
    INVALIDATION[case] = doc
