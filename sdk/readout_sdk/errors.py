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
    """A family-specific call on an engine of another family."""


class DeviceUnavailable(SdkError, RuntimeError):
    """The requested device or precision does not exist on this machine or in this artifact."""


class AbiError(SdkError, ValueError):
    """A record or version that this SDK cannot accept."""


class Busy(SdkError, RuntimeError):
    """Another run holds the output this run would write (see `readout_sdk.staging`)."""


class Closed(SdkError, RuntimeError):
    """A call on an engine or runner after close()."""
