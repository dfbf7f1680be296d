"""How every command writes a directory (an artifact, a calibrated artifact, a Triton repository, an
encoded dataset): one writer at a time per output, staged beside it, swapped in whole.

- :func:`exclusive` holds a lock file beside the output (``.NAME.lock``, an ``flock``: the kernel drops
  it when its process dies, so a killed run never blocks the next one). A second run on the same output
  is refused (:class:`~readout_sdk.errors.Busy`) or, where asked, waits.
- Under the lock, staging directories that killed runs left (``.NAME.partial-*``, ``.NAME.old-*``,
  ``.NAME.staging-*``) are removed: no live run can own them.
- :func:`staged` yields a fresh staging directory; :func:`place` swaps it in, the old one removed only
  after the swap. On any failure the staging directory goes, and so do parent directories the run created.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from readout_sdk.errors import Busy

STALE = ("partial", "old", "staging")


def lock_path(out: Path) -> Path:
    return out.parent / f".{out.name}.lock"


@contextmanager
def exclusive(out: Path, wait: float = 0.0, what: str = "written") -> Iterator[None]:
    """Hold the lock of output ``out`` (a path; the lock lives beside it). ``wait``: seconds to wait for
    another holder before refusing with :class:`Busy` (0: refuse at once)."""
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock, as before
        yield
        return
    path = lock_path(out)
    deadline = time.monotonic() + wait
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            if time.monotonic() >= deadline:
                raise Busy(f"{out} is being {what} by another run{holder}; wait for it to finish or choose "
                           "another output") from None
            time.sleep(0.05)
            continue
        try:  # the lock file may have been unlinked by the holder we waited for: lock the one on disk
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        try:
            os.unlink(path)  # unlinked while still held: a waiter re-checks the inode and retries
        except FileNotFoundError:
            pass
        os.close(fd)


def _holder(fd: int) -> str:
    try:
        pid = os.pread(fd, 32, 0).decode().strip()
    except OSError:
        return ""
    return f" (pid {pid})" if pid.isdigit() else ""


def sweep(out: Path) -> list[Path]:
    """Remove what killed runs left beside ``out``; call only while holding its lock."""
    removed = []
    for kind in STALE:
        for p in out.parent.glob(f".{out.name}.{kind}-*"):
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() and not p.is_symlink() else p.unlink(missing_ok=True)
            removed.append(p)
    return removed


@contextmanager
def staged(out: Path, what: str = "written") -> Iterator[Path]:
    """Lock ``out``, sweep stale staging, and yield a new staging directory beside it (readable by other
    accounts, as the umask allows). Whatever happens, the staging directory is gone afterwards, and parent
    directories this run created are removed again if ``out`` was not placed."""
    created = [p for p in reversed(out.parents) if not p.exists()]
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        with exclusive(out, what=what):
            sweep(out)
            staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(staging, 0o777 & ~umask)  # mkdtemp makes 0700; an artifact is read by other accounts too
            try:
                yield staging
            finally:
                if staging.exists():
                    shutil.rmtree(staging, ignore_errors=True)
    finally:
        if not out.exists():
            for p in reversed(created):
                if p.is_dir() and not any(p.iterdir()):
                    p.rmdir()


def place(staging: Path, out: Path) -> None:
    """Swap the finished staging directory in for ``out``; an old one is removed only after the swap
    (and put back if the swap fails)."""
    old = None
    if out.exists():
        old = out.parent / f".{out.name}.old-{os.getpid()}"
        os.replace(out, old)
    try:
        os.replace(staging, out)
    except OSError:
        if old is not None:
            os.replace(old, out)  # put the previous one back
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
