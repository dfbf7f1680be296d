"""`readout-export serve-http` as a user starts it, on loopback: a subprocess on a free port (port 0; the
ready line says which), stopped with SIGTERM as a service manager stops it."""
from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

READY = re.compile(r"serving .* at (http://[0-9.]+:[0-9]+)")


class HttpServer:
    """``HttpServer(["name=path", ...], "--api-key", "k")``; ``.url``; ``.stop()`` returns the exit code."""

    def __init__(self, artifacts: list[str], *options: str, timeout: float = 180.0, port: int = 0):
        self.cmd = [str(Path(sys.executable).parent / "readout-export"), "serve-http", *artifacts, "--port", str(port),
                    *options]
        self.timeout = timeout
        self.lines: list[str] = []
        self.url = ""

    def __enter__(self) -> "HttpServer":
        self.process = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        found = threading.Event()

        def read() -> None:  # keep draining the pipe so the server never blocks on its output
            assert self.process.stdout is not None
            for line in self.process.stdout:
                self.lines.append(line.rstrip())
                m = READY.search(line)
                if m and not self.url:
                    self.url = m.group(1)
                    found.set()
            found.set()

        threading.Thread(target=read, daemon=True).start()
        deadline = time.monotonic() + self.timeout
        while not found.wait(0.2):
            if time.monotonic() > deadline:
                self.process.kill()
                raise TimeoutError(f"serve-http did not start in {self.timeout}s: {self.lines[-5:]}")
        if not self.url:
            raise RuntimeError(f"serve-http exited {self.process.wait()}: {self.lines[-5:]}")
        return self

    def stop(self, timeout: float = 60.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            raise

    def __exit__(self, *exc: Any) -> None:
        if self.process.poll() is None:
            self.stop()


def free_port() -> int:
    """A port nothing listens on now (for servers that cannot bind port 0 themselves, as Ray Serve's proxy)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loaded(shared: Any, served: dict[str, str]) -> Any:
    """The SDK engines of ``served`` (``{name: shared artifact key}``), the oracle the server's answers are held
    to; a generator for a module fixture (closes them at the end)."""
    import readout_sdk

    out = {name: readout_sdk.load(shared(key)[1]) for name, key in served.items()}
    yield out
    for e in out.values():
        e.close()


def serving(shared: Any, served: dict[str, str], key: str) -> Any:
    """A server of ``served`` behind API key ``key``; a generator for a module fixture (stops it, exit 0)."""
    with HttpServer([f"{name}={shared(k)[1]}" for name, k in served.items()], "--api-key", key) as s:
        yield s
        assert s.stop() == 0, s.lines[-5:]
