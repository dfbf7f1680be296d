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


# the app that runs each family's artifact (examples/demo_models.py builds one artifact per family)
APP_FOR = {"embedding": "embed.py", "sequence_classification": "classify.py", "multilabel_classification": "classify.py",
           "regression": "classify.py", "token_classification": "tag.py", "extractive_qa": "answer.py",
           "cross_encoder": "rerank.py", "late_interaction": "late.py", "sparse": "sparse.py",
           "multiple_choice": "choose.py"}


def parser(doc: str) -> argparse.ArgumentParser:
    """An argument parser whose first positional argument is the artifact directory."""
    first, _, rest = (doc or "").strip().partition("\n")
    p = argparse.ArgumentParser(description=first, epilog=rest.strip() or None,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("artifact", nargs="?", help="an artifact directory (readout-export build writes one)")
    return p


def parse(p: argparse.ArgumentParser) -> argparse.Namespace:
    """The arguments, options allowed between the texts (``tag.py ART --aggregation first "text"``); a
    missing artifact is one line naming what the app needs."""
    args = p.parse_intermixed_args()
    if args.artifact is None:
        p.error("give an artifact directory first (python examples/demo_models.py --build writes one per family)")
    return args


def complete(p: argparse.ArgumentParser, given: dict[str, object], built_in: dict[str, object]) -> dict[str, object]:
    """``given`` when every part of the input was given, the built-in example when none was; half an input
    (a question without its context) is refused rather than completed with text the user never wrote."""
    missing = [name for name, value in given.items() if value in (None, [])]
    if not missing:
        return given
    if len(missing) == len(given):
        return built_in
    p.error(f"give {' and '.join(n.upper() for n in given)}, or none of them for the built-in example "
            f"(missing: {', '.join(n.upper() for n in missing)})")
    raise AssertionError  # p.error exits


def load(path: str, app: str):  # -> readout_sdk.Engine
    """``readout_sdk.load(path)``, refusing an artifact of a family this app does not run, naming the app
    that does (``app``: this script's file name)."""
    import warnings

    import readout_sdk

    with warnings.catch_warnings(record=True) as said:  # a DRAFT artifact: one plain note, after the checks
        warnings.simplefilter("always", readout_sdk.DraftWarning)
        engine = readout_sdk.load(path)
    if APP_FOR.get(engine.family) != app:
        engine.close()
        raise WrongApp(f"{path}: its family is {engine.family}; {app} runs "
                       f"{' / '.join(f for f, a in APP_FOR.items() if a == app)} artifacts: use "
                       f"python examples/apps/{APP_FOR.get(engine.family, '?')} {path}")
    for w in said:
        if issubclass(w.category, readout_sdk.DraftWarning):
            print(f"note: {w.message}", file=sys.stderr)
        else:  # anything else the load said, as Python would have said it
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return engine


class WrongApp(Exception):
    """An artifact of another family than the app's."""


@contextmanager
def one_line_errors() -> Iterator[None]:
    """Turn any failure (a wrong artifact, a refused input, a missing runtime) into ``error: ...`` on
    stderr and exit status 2; an interrupt exits 130."""
    try:
        yield
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:  # the output was piped into `head`: nothing left to say
        sys.stderr.close()
        sys.exit(0)
    except Exception as e:  # a demo prints what went wrong, in one line, whatever it was
        from readout_sdk.errors import first_line

        print(f"error: {first_line(e)}", file=sys.stderr)
        sys.exit(2)
