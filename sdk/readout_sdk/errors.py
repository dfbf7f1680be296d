"""Errors the SDK raises; each message names the problem and, where there is one, the fix."""
from __future__ import annotations


def first_line(e: BaseException) -> str:
    """An exception's first line, bounded: what a one-line error quotes from a library."""
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:240]


class SdkError(Exception):
    """Base class of every error the SDK raises: a refusal whose message names the problem (and the file
    or JSON path). Each subclass keeps the built-in base callers already catch (ValueError, RuntimeError,
    TypeError), so ``except SdkError`` and ``except ValueError`` both keep working."""


class InputRefused(SdkError, ValueError):
    """An input this artifact's record says cannot be answered (e.g. zero rows to pool)."""


class WrongCall(SdkError, TypeError):
    """A call made the wrong way: an argument of the wrong type (a str where a list of items belongs), or a
    family-specific call on an engine of another family."""


class BadArgument(SdkError, ValueError):
    """An argument value outside what the call accepts (a batch size below 1, a mode that is not one of the
    listed ones, score matrices of different shapes); the message names the argument and what it accepts."""


class UnknownName(SdkError, KeyError):
    """A name that a registry (devices, backends, target kinds, layers) has no entry for; the message lists
    the known ones. A KeyError for callers that look names up, but printed as its message: KeyError's own
    ``str`` would quote it."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class FormError(SdkError, ValueError):
    """A vector form that cannot be: its record (width, precision, ranges), or vectors that do not fit it
    (the wrong shape or dtype, rows that are not finite where a quantized form needs numbers)."""


class WindowError(SdkError, ValueError):
    """Windows of one long input that cannot be stitched back into one sequence (no windows, rows that
    differ between windows, a stride or layout that does not fit)."""


class MissingExtra(SdkError, ImportError):
    """An optional part of the SDK whose extra is not installed; the message names the install line (the CLI:
    one line, exit 2, as for any setup problem)."""


class BelowPolicy(SdkError, RuntimeError):
    """An artifact whose lifecycle state is below the load policy (``min_state``, or the ``READOUT_MIN_STATE``
    environment variable): the message names its state, what it lacks and the command that supplies it."""


class DraftWarning(SdkError, UserWarning):
    """A DRAFT artifact loaded without a policy (no parity evidence for its release): warned once per release
    and process. ``READOUT_MIN_STATE=RECONCILED`` refuses it instead; ``warnings.filterwarnings("ignore",
    category=DraftWarning)`` silences it."""


class Closed(SdkError, RuntimeError):
    """A call on something already closed (a runner, an engine): open a new one. ``close()`` itself may be
    called again at no cost."""


class DeviceUnavailable(SdkError, RuntimeError):
    """The requested device or precision does not exist on this machine or in this artifact."""


class AbiError(SdkError, ValueError):
    """A record or version that this SDK cannot accept."""


class Busy(SdkError, RuntimeError):
    """Another run holds the output this run would write (see `readout_sdk.staging`)."""


class WrongItem(SdkError, TypeError):
    """An input item (or request row) of the wrong type for what the family's input kind reads
    (`readout_sdk.input_kinds`): a TypeError too, so callers that catch the built-in keep working."""
