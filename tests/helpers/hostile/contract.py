"""The contract every hostile outcome is held to: the Outcome classes (REFUSED, OK, BAD), how a wrong
exception or a CLI exit is classified, deduplicated and reported, and :func:`explore`, which runs fixed and
generated cases with a fixed seed."""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from hypothesis import HealthCheck, Phase, given, settings, strategies as st
from hypothesis import seed as hypothesis_seed


REFUSED, OK, BAD = "refused", "ok", "bad"
MANIFEST, ARTIFACT, SDK = "manifest", "artifact", "sdk"
REFUSE, EITHER = "refuse", "either"  # what a case expects: a refusal, or a refusal or a valid result
# a Python exception class named in a message meant for users (KeyError:, UnicodeDecodeError, ...)
EXCEPTION_NAME = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception)\b|pyo3_runtime|Traceback")
RUNTIME_TAGS = re.compile(r"\[ONNXRuntimeError\]")  # onnxruntime's own message format, not a Python class name


def names_exception(text: str) -> str | None:
    """The Python exception class (or traceback, or Rust panic) a user-facing message names, if any."""
    m = EXCEPTION_NAME.search(RUNTIME_TAGS.sub("", text))
    return m.group(0) if m else None


NAMES_A_FILE = re.compile(r"[\w.-]+\.(json|onnx|engine|plan|log|txt|safetensors|bin|model)\b")


def short(value: Any, limit: int = 160) -> str:
    """repr(value), truncated (hostile inputs can be megabytes)."""
    try:
        text = value if isinstance(value, str) and value.startswith("<") else repr(value)
    except BaseException as e:  # noqa: BLE001 - a repr that raises is still an input to report
        text = f"<unrepresentable {type(value).__name__}: {e}>"
    return text if len(text) <= limit else text[:limit - 20] + f"...<{len(text)} chars>"


def printable(text: str) -> str:
    """``text`` safe to print anywhere: lone surrogates and control characters escaped."""
    text = str(text).encode("utf-8", "backslashreplace").decode("utf-8")
    return re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", lambda m: repr(m.group())[1:-1], text)


def first_line(text: str, limit: int = 220) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[:limit] + "..."


def describe_exception(e: BaseException) -> str:
    return f"{type(e).__module__}.{type(e).__name__}: {first_line(str(e))}".replace("builtins.", "")


def normalize(text: str) -> str:
    """A message with its variable parts (paths, hashes, numbers) replaced, for deduplication."""
    text = re.sub(r"(/tmp|/var|/private)[^\s'\"():,]*", "<path>", text)
    text = re.sub(r"\b[0-9a-f]{12,64}\b", "<hex>", text)
    text = re.sub(r"\d+", "N", text)
    return text[:160]


@dataclass
class Outcome:
    """What one hostile case did, classified."""

    klass: str     # MANIFEST, ARTIFACT or SDK
    kind: str      # REFUSED, OK or BAD
    case: str      # the generator's label for the case (generalized: [*] for list indices)
    detail: str    # what happened (for BAD: why it is bad)
    input: str     # the input, repr'd and truncated
    problem: str = ""  # BAD only: the kind of problem, without the input's specifics (for deduplication)

    def __post_init__(self) -> None:
        self.case, self.detail, self.input, self.problem = map(printable, (self.case, self.detail, self.input,
                                                                           self.problem))

    @property
    def signature(self) -> str:
        return f"{self.klass} | {self.problem}"

    def to_json(self) -> dict[str, str]:
        return {"class": self.klass, "kind": self.kind, "case": self.case, "detail": self.detail,
                "input": self.input, "signature": self.signature}


def bad(klass: str, case: str, detail: str, input: str, problem: str | None = None) -> Outcome:
    return Outcome(klass, BAD, case, detail, input, problem or normalize(detail))


PROJECT_PACKAGES = ("readout_sdk", "readout_export", "readout_parity")


def origin(e: BaseException | None) -> str | None:
    """Where in the project an exception was raised: the innermost readout_* frame, as
    ``package/module.py:function:line`` (None when no project frame is on its traceback)."""
    where = None
    tb = e.__traceback__ if e is not None else None
    while tb is not None:
        parts = Path(tb.tb_frame.f_code.co_filename).parts
        for i, part in enumerate(parts):
            if part in PROJECT_PACKAGES:
                where = f"{'/'.join(parts[i:])}:{tb.tb_frame.f_code.co_name}:{tb.tb_lineno}"
                break
        tb = tb.tb_next
    return where


def raised(klass: str, case: str, what: str, e: BaseException, shown: str, expected: str) -> Outcome:
    """A BAD outcome for an exception of the wrong kind, deduplicated by type and the project frame
    that raised it."""
    where = origin(e)
    at = f" at {where}" if where else ""
    problem = f"{what}: {type(e).__name__}" + (f" at {where}" if where else
                                                f": {normalize(first_line(str(e)))[:90]}")
    return bad(klass, case, f"{what}: raised {describe_exception(e)}{at} (expected {expected})", shown, problem)


def reproduce(fn: Callable[[], Any]) -> BaseException | None:
    """Call what a CLI command ran, in-process, to recover the exception it turned into exit 1."""
    try:
        fn()
    except BaseException as e:  # noqa: BLE001
        return e
    return None


def distinct_bad(outcomes: Iterable[Outcome]) -> list[tuple[Outcome, int]]:
    """Each distinct BAD outcome once (first example), with how often it occurred; most frequent first."""
    seen: dict[str, list] = {}
    for o in outcomes:
        if o.kind == BAD:
            seen.setdefault(o.signature, [o, 0])[1] += 1
    return sorted(((o, n) for o, n in seen.values()), key=lambda x: -x[1])


def report(outcomes: Sequence[Outcome], limit: int = 12) -> str:
    """The distinct BAD outcomes, one paragraph each (an assertion message)."""
    rows = distinct_bad(outcomes)
    lines = [f"{sum(n for _, n in rows)} BAD of {len(outcomes)} tried, {len(rows)} distinct:"]
    for o, n in rows[:limit]:
        lines.append(f"  [{n}x] {o.case}: {o.detail}\n        input: {o.input}")
    if len(rows) > limit:
        lines.append(f"  ... and {len(rows) - limit} more")
    return "\n".join(lines)


def explore(strategy: st.SearchStrategy | None, run_one: Callable[[Any], Outcome], budget: int, seed: int = 15,
            fixed: Iterable[Any] = ()) -> list[Outcome]:
    """Run every fixed case, then ``budget`` cases drawn from ``strategy`` (fixed seed, no shrinking, no
    example database); every outcome is kept, none raises."""
    outcomes = [run_one(case) for case in fixed]
    if strategy is None or budget <= 0:
        return outcomes

    @hypothesis_seed(seed)
    @settings(max_examples=budget, deadline=None, database=None, phases=[Phase.generate], derandomize=False,
              suppress_health_check=list(HealthCheck), report_multiple_bugs=False)
    @given(strategy)
    def go(case: Any) -> None:
        outcomes.append(run_one(case))

    go()
    return outcomes


def check_cli(klass: str, case: str, shown: str, result: Any, expect: str, what: str,
              again: Callable[[], Any] | None = None) -> Outcome:
    """Classify one CLI invocation (a click.testing.Result) against the one-line-error contract; ``again``
    re-runs the command's body in-process to find where an exit 1 came from."""
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return raised(klass, case, f"{what} (uncaught)", result.exception, shown, "exit 2 and one error line")
    try:
        err, out = result.stderr, result.stdout
    except BaseException as e:  # noqa: BLE001 - undecodable output is itself a finding
        return bad(klass, case, f"{what}: output cannot be decoded ({describe_exception(e)})", shown)
    outcome = check_exit(klass, case, shown, result.exit_code, out, err, expect, what)
    if outcome.kind == BAD and result.exit_code == 1 and again is not None:
        e = reproduce(again)
        if e is not None and origin(e):
            where = origin(e)
            outcome.detail += f" (raised at {where})"
            outcome.problem = f"{what}: exit 1: {type(e).__name__} at {where}"
    return outcome


def check_exit(klass: str, case: str, shown: str, code: int, out: str, err: str, expect: str, what: str) -> Outcome:
    line = first_line(err)
    if "Traceback" in err or "Traceback" in out:
        return bad(klass, case, f"{what}: exit {code}, traceback: {line}", shown, f"{what}: traceback")
    if code == 0:
        if expect == EITHER:
            return Outcome(klass, OK, case, f"{what}: exit 0", shown)
        return bad(klass, case, f"{what}: accepted (exit 0) something meaningless", shown,
                   f"{what} accepts: {case}")
    if code != 2:
        return bad(klass, case, f"{what}: exit {code}: {line}", shown, f"{what}: exit {code}: {normalize(line)}")
    lines = err.strip().splitlines()
    several = what.startswith("validate")  # validate reports every problem, one line each; the rest stop at one
    if not lines or (len(lines) > 1 and not several):
        return bad(klass, case, f"{what}: exit 2 but {len(lines)} lines on stderr: {short(err, 200)}", shown,
                   f"{what}: {len(lines) > 1 and 'several lines' or 'no line'} on stderr: {normalize(line)[:60]}")
    for line in lines:
        if not line.startswith("error: "):
            return bad(klass, case, f"{what}: exit 2 but a stderr line does not start 'error: ': {line}", shown)
        if names_exception(line):
            return bad(klass, case, f"{what}: the message names a Python exception: {line}", shown,
                       f"{what}: names {names_exception(line)}: {normalize(line)[:80]}")
        body = line[len("error: "):]
        if not (body.startswith("$") or "/" in body or NAMES_A_FILE.search(body)):
            return bad(klass, case, f"{what}: the message names no JSON path or file: {line}", shown)
    line = lines[0]
    return Outcome(klass, REFUSED, case, line, shown)
