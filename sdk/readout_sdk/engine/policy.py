"""The load policy: the least lifecycle state an artifact must have reached to be loaded.

A deployment states it once (``READOUT_MIN_STATE=RECONCILED``: parity passed for this very release) and
every `readout_sdk.load` (the HTTP server, Triton, Ray included) refuses an artifact below it. Without a
policy a DRAFT artifact still loads, with a one-time warning: a development loop stays quick, and nobody
ships a DRAFT without having been told.
"""
from __future__ import annotations

import os
import warnings
from typing import Any

from readout_sdk.errors import BelowPolicy, DraftWarning
from readout_sdk.release.lifecycle import STATES, derive

ENVIRONMENT = "READOUT_MIN_STATE"
_warned: set[str] = set()  # releases (or paths) this process has warned about


def check_state(art: Any, min_state: str | None) -> None:
    """Refuse ``art`` below ``min_state`` (default: the ``READOUT_MIN_STATE`` environment variable); without
    either, warn once when it is DRAFT."""
    from readout_sdk.arguments import one_of

    wanted = min_state if min_state is not None else (os.environ.get(ENVIRONMENT) or None)
    if wanted is not None:
        one_of("min_state" if min_state is not None else ENVIRONMENT, wanted, STATES)
    state = derive(art)
    if wanted is not None and not state.at_least(wanted):
        raise BelowPolicy(f"{art.path}: {state.state}, below the load policy {wanted} "
                          f"({'min_state' if min_state is not None else ENVIRONMENT}); it lacks "
                          f"{'; '.join(state.missing) or 'the evidence of a later state'}"
                          + ("; run `readout-export parity` on it" if state.state == "DRAFT" else ""))
    key = (art.identity.release_id if art.identity else None) or str(art.path)
    if wanted is None and state.state == "DRAFT" and key not in _warned:
        _warned.add(key)
        warnings.warn(f"{art.path} is DRAFT: no parity evidence for this release (`readout-export parity` proves it; "
                      f"{ENVIRONMENT}=RECONCILED refuses such artifacts)", DraftWarning, stacklevel=4)
