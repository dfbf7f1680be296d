"""How every `readout-export` command body runs: known errors become one line and the right exit code
(0 success, 2 bad manifest, artifact or usage, 1 build failure); no traceback unless --debug."""
from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any, Callable

import click

from readout_export.errors import ManifestProblems, ReadoutExportError, SetupError


# the extra that brings each optional module a command may import (docs/extras.md)
EXTRA_OF = {"torch": "export", "transformers": "export", "onnx": "export", "onnxscript": "export",
            "safetensors": "export", "onnxruntime": "cpu", "openvino": "openvino", "nncf": "openvino",
            "matplotlib": "eval", "sklearn": "eval", "scipy": "eval", "pytrec_eval": "eval",
            "sentence_transformers": "bench", "tensorrt": "tensorrt", "polygraphy": "tensorrt", "cuda": "tensorrt",
            "tritonclient": "triton", "pytriton": "serve", "starlette": "http", "uvicorn": "http",
            "prometheus_client": "http", "ray": "ray", "pyarrow": "ray"}


def setup_error(e: BaseException) -> SetupError | None:
    """A missing optional module or an unwritable location, as the one line that names the fix; None otherwise."""
    import errno

    if isinstance(e, ModuleNotFoundError) and e.name:
        top = e.name.split(".")[0]
        extra = EXTRA_OF.get(top)
        fix = f"pip install 'readout-export[{extra}]'" if extra else f"install {top}"
        return SetupError(f"this command needs {top}, which is not installed: {fix}")
    if isinstance(e, OSError) and e.errno in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EISDIR):
        where = e.filename or "a file it needs"
        why = {errno.EROFS: "the file system is read-only", errno.ENOTDIR: "part of that path is a file, not a "
               "directory", errno.EISDIR: "it is a directory"}.get(e.errno, "permission denied")
        fix = "give this account access to it, or choose another location" if e.errno in (errno.EACCES, errno.EPERM) \
            else "choose another location"
        return SetupError(f"cannot use {where}: {why}; {fix}")
    return None


def run_command(debug: bool, as_json: bool, fn: Callable[[], Any]) -> Any:
    """Call ``fn``; turn every failure into one line and its exit code: 2 for bad input (a manifest, an
    artifact, data or usage: the SDK's refusals and a busy output included) and for what this machine lacks
    (an extra, a writable location), 1 for a failure of the work itself, 130 for an interrupt. A usage error
    raised in a command's body (click's BadParameter) is click's to print, as one line. A native panic (a
    BaseException) is a failure like any other."""
    import warnings

    from readout_sdk.errors import DraftWarning

    try:
        with warnings.catch_warnings():
            # a command states an artifact's lifecycle where it matters (build, inspect, verify, parity); the
            # SDK's one-time DRAFT warning is for programs that load one silently
            warnings.simplefilter("ignore", DraftWarning)
            return fn()
    except click.ClickException:
        raise
    except ManifestProblems as e:
        fail(e.exit_code, str(e), as_json, debug, e.lines())
    except ReadoutExportError as e:
        fail(e.exit_code, str(e), as_json, debug)
    except KeyboardInterrupt:
        fail(130, "interrupted; nothing was left that looks finished", as_json, debug)
    except (SystemExit, GeneratorExit):
        raise
    except BaseException as e:  # the SDK's own errors, and anything unexpected
        code = exit_code(e)
        if code is not None:
            fail(code, str(e), as_json, debug)
        setup = setup_error(e)
        if setup is not None:
            fail(setup.exit_code, str(setup), as_json, debug)
        first = (str(e).strip().splitlines() or [""])[0][:300]
        fail(1, f"unexpected failure ({type(e).__name__}{': ' + first if first else ''})", as_json, debug)


def exit_code(e: BaseException) -> int | None:
    """The one map from error classes to exit codes: the exporter's errors carry theirs (2 bad input, 1
    a failure of the work); every SDK error is a refusal of its input (an artifact, data, a device or
    target this machine lacks), as is parity's (a source that is not the artifact's): 2, as is a file that is
    not there. None: unexpected (exit 1, with its type)."""
    from readout_parity.checks import ParityError
    from readout_sdk.errors import SdkError

    if isinstance(e, ReadoutExportError):
        return e.exit_code
    if isinstance(e, SdkError):  # a refusal, unless the error says the work itself failed (Ray lost rows)
        return int(getattr(e, "exit_code", 2))
    if isinstance(e, (ParityError, FileNotFoundError)):
        return 2
    return None


def require_export_extra() -> None:
    """Building needs torch, transformers and onnx; the base install (the thin SDK) has none of them."""
    import importlib.util

    missing = [m for m in ("torch", "transformers", "onnx", "onnxscript") if importlib.util.find_spec(m) is None]
    if missing:
        raise SetupError(f"this command needs the export extra (missing: {', '.join(missing)}); "
                         "install it with: pip install 'readout-export[export]'")
    from readout_sdk.targets.backends import onnxruntime_module

    onnxruntime_module()  # checks and converts graphs with either wheel; refuses, naming both, when there is none


def fail(code: int, message: str, as_json: bool, debug: bool, every: list[str] | None = None) -> None:
    """Print ``message`` as one line (``error: ...``, or a JSON object) and exit with ``code``;
    ``every``: several problems, one ``error:`` line each (JSON: an ``errors`` list beside the first)."""
    lines = [" ".join(m.split()) or "failed" for m in (every or [message])]
    if debug:
        traceback.print_exc()
    if as_json:
        click.echo(json.dumps({"ok": False, "error": lines[0], "exit_code": code}
                              | ({"errors": lines} if every else {})))
    else:
        for line in lines:
            click.echo(f"error: {line}", err=True)
        if code == 1 and not debug:
            click.echo("(run with --debug for the traceback)", err=True)
    sys.exit(code)


class UsageLine(click.ClickException):
    """A usage error (a missing argument, an unknown option or command) as one line, exit code 2."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def _one_line(e: click.UsageError) -> click.UsageError:
    if type(e).__name__ == "NoArgsIsHelpError":  # bare `readout-export`: click's help is the answer
        return e
    where = e.ctx.command_path if e.ctx is not None else "readout-export"
    return UsageLine(f"{e.format_message()} (see '{where} --help')")


class OneLineGroup(click.Group):
    """click's group, with its usage errors (and its commands') printed as one line instead of click's
    usage block: 'error: Missing argument 'MANIFEST'. (see 'readout-export build --help')'."""

    def make_context(self, *args: Any, **kwargs: Any) -> click.Context:
        try:
            return super().make_context(*args, **kwargs)
        except click.UsageError as e:
            raise _one_line(e) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:  # resolving the command, parsing its arguments and its body
            return super().invoke(ctx)
        except click.UsageError as e:
            raise _one_line(e) from None


class Directory(click.Path):
    """click's ``Path(file_okay=False)`` with a plain refusal for a file: "'x' is a file, not an artifact
    directory" instead of click's "Directory 'x' is a file"."""

    def __init__(self, what: str = "a directory") -> None:
        super().__init__(file_okay=False)
        self.what = what

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.startswith("-"):  # `--plots -q`: an option taken for a path
            self.fail(f"'{value}' looks like an option, not a directory (write e.g. ./{value} for such a directory)",
                      param, ctx)
        if isinstance(value, str) and os.path.isfile(value):
            self.fail(f"'{value}' is a file, not {self.what}", param, ctx)
        return super().convert(value, param, ctx)


class FilePath(click.Path):
    """A file a command reads or writes (``--report``, ``--junit``, ``--plot``, ``--data``, ``--log-file`` ...): a
    value that looks like an option is refused, so ``--report -q`` is a usage error, not a file named ``-q``.
    ``--json`` is never a file: it is the switch that prints the result as JSON on stdout, on every command."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("dir_okay", False)
        super().__init__(**kwargs)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and value.startswith("-"):
            self.fail(f"'{value}' looks like an option, not a file name (write e.g. ./{value} for such a file)",
                      param, ctx)
        return super().convert(value, param, ctx)


ARTIFACT_DIR = Directory("an artifact directory (the one build writes, with readout.json in it)")
