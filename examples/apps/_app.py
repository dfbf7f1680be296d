"""What every example app shares: a command line with --help, and errors as one line (never a traceback).

The apps are thin on purpose: each loads an artifact with ``readout_sdk.load`` and prints typed results.
Run one on the artifact of its family, e.g. ``python examples/apps/tag.py examples/demo/token_classification/artifact``
(``python examples/demo_models.py --build`` builds one artifact per family).
"""
from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager
from typing import Iterator


def parser(doc: str) -> argparse.ArgumentParser:
    """An argument parser whose first positional argument is the artifact directory."""
    first, _, rest = (doc or "").strip().partition("\n")
    p = argparse.ArgumentParser(description=first, epilog=rest.strip() or None,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("artifact", help="an artifact directory (readout-export build writes one)")
    return p


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Turn any failure (a wrong artifact, a refused input, a missing runtime) into ``error: ...`` on
    stderr and exit status 2; an interrupt exits 130."""
    try:
        yield
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as e:  # a demo prints what went wrong, in one line, whatever it was
        from readout_sdk.errors import first_line

        print(f"error: {first_line(e)}", file=sys.stderr)
        sys.exit(2)
