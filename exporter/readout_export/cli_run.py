"""How every `readout-export` command body runs: known errors become one line and the right exit code
(0 success, 2 bad manifest, artifact or usage, 1 build failure); no traceback unless --debug."""
from __future__ import annotations

import json
import sys
import traceback
from typing import Any, Callable

import click

from readout_export.errors import ReadoutExportError


def run_command(debug: bool, as_json: bool, fn: Callable[[], Any]) -> Any:
    """Call ``fn``; turn known errors into one line and the right exit code."""
    try:
        return fn()
    except ReadoutExportError as e:
        fail(e.exit_code, str(e), as_json, debug)
    except Exception as e:  # the artifact SDK's own errors and anything unexpected
        from readout_sdk.artifact import ArtifactError
        from readout_sdk.errors import InputRefused

        code = 2 if isinstance(e, (ArtifactError, FileNotFoundError, InputRefused)) else 1
        fail(code, f"{type(e).__name__}: {e}" if code == 1 else str(e), as_json, debug)


def require_export_extra() -> None:
    """Building needs torch, transformers and onnx; the base install (the thin SDK) has none of them."""
    import importlib.util

    missing = [m for m in ("torch", "transformers", "onnx", "onnxscript") if importlib.util.find_spec(m) is None]
    if missing:
        from readout_export.errors import ReadoutExportError

        raise ReadoutExportError(f"building needs the export extra (missing: {', '.join(missing)}); "
                                 "install it with: pip install 'readout-export[export]'")


def fail(code: int, message: str, as_json: bool, debug: bool) -> None:
    if debug:
        traceback.print_exc()
    if as_json:
        click.echo(json.dumps({"ok": False, "error": message, "exit_code": code}))
    else:
        click.echo(f"error: {message}", err=True)
        if code == 1 and not debug:
            click.echo("(run with --debug for the traceback)", err=True)
    sys.exit(code)
