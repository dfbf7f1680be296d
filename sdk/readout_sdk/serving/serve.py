"""Serve an artifact through a real Triton Inference Server, bound to the SDK with PyTriton.

Clients use the standard ``tritonclient`` HTTP/gRPC API: one BYTES input per request field
(``Family.fields``, e.g. ``text``; shape ``[n, 1]``) and one BYTES output ``result`` holding
each row's typed record as JSON (the same record the generated Triton model and Ray return). Triton's
dynamic batcher merges concurrent requests; the SDK then sorts the merged rows by length into its own
batches. A request whose rows the SDK refuses gets ``{"error": "..."}`` records and does not fail the
requests batched with it (PyTriton can only fail a whole batch).

Triton's own output (its log, and whatever the server process prints: about 60 lines at start-up, GPU
probes that fail on a CPU machine included) goes to a log file, never to the terminal: :func:`run`
reports one line per state change instead (starting, loading, ready, stopping, stopped, failed: with
the last relevant lines of that log).

Needs the ``serve`` extra: ``pip install 'readout-export[serve]'`` (nvidia-pytriton bundles the server).
"""
from __future__ import annotations

import collections
import contextlib
import logging
import os
import re
import socket
import sysconfig
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from readout_sdk.errors import MissingExtra, SdkError

from readout_sdk.serving.records import ROLE_FIELD, json_column, predict_groups, rows_from_columns, serving_fields
from readout_sdk.serving.triton_model import model_name

SERVE_EXTRA = "pip install 'readout-export[serve]'"

# Lines Triton prints on every machine without an NVIDIA GPU (or by PyTriton's design); never the reason a
# start failed, so never quoted as one.
HARMLESS = re.compile(r"NVML|DCGM|CudaDriverHelper|pinned memory|CUDA driver|CUDA memory pool|"
                      r"model_config_content_name_|Signal \(\d+\) received|exited with failure\. Please wait")
# Triton's log lines start with a level letter and a date: E1205 07:26:52.168387 5598 server.cc:241] ...
LEVEL = re.compile(r"^([IWE])\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [^\]]*\] ?")


@dataclass(frozen=True)
class ServeOptions:
    """Where and how the server listens and batches."""

    host: str = "127.0.0.1"        # loopback unless asked: exposing a model is a deliberate choice
    http_port: int = 8000
    grpc_port: int = 8001
    metrics_port: int = 8002
    max_batch_size: int = 64       # rows Triton may merge into one call
    max_queue_delay_us: int = 2000  # how long Triton waits to fill a batch
    log_file: str | None = None    # Triton's own log; None: default_log_file(model, http_port)


class ServeFailed(SdkError, RuntimeError):
    """The server could not start or stopped by itself. ``exit_code``: 2 for a setup problem found before
    starting (a port in use, an unwritable log file), 1 for a server that failed; ``log``: the log file;
    ``lines``: the last relevant lines of Triton's log (empty when it never started)."""

    def __init__(self, message: str, exit_code: int = 1, log: Path | None = None, lines: tuple[str, ...] = ()):
        super().__init__(message)
        self.exit_code, self.log, self.lines = exit_code, log, lines


class _ServerExited(BaseException):
    """Raised in the main thread when the server process exits while PyTriton is still waiting for it."""


def default_log_file(model: str, http_port: int) -> Path:
    """Where ``serve`` writes Triton's log unless told: ``$XDG_STATE_HOME/readout-export/serve/MODEL-PORT.log``
    (``~/.local/state/...`` without XDG_STATE_HOME). One file per model and HTTP port, rewritten at each
    start: two servers never share one, and a restarted server's log replaces its last run's."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "readout-export" / "serve" / f"{model}-{http_port}.log"


def infer_function(engine: Any, batch_size: int = 32) -> Callable[[list[Any]], list[dict[str, np.ndarray]]]:
    """A PyTriton infer function over a list of requests: every row in one SDK call, replies per request."""
    need = serving_fields(engine.abi)
    release = np.array([str(engine.release_id or "").encode()], dtype=object)

    def infer(requests: list[Any]) -> list[dict[str, np.ndarray]]:
        groups = [rows_from_columns({f: request[f] for f in need if f in request}) for request in requests]
        replies = []
        for group, result in zip(groups, predict_groups(engine, groups, batch_size)):
            records = [{"error": str(result)}] * len(group) if isinstance(result, Exception) else result
            replies.append({"result": json_column(records),  # and which release answered, per row
                            "release_id": np.tile(release, (len(group), 1))})
        return replies

    return infer


def _with_python_library_path() -> None:
    """Triton's Python backend stub links against libpython: it must find this interpreter's."""
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    paths = os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)
    if libdir and libdir not in paths:
        os.environ["LD_LIBRARY_PATH"] = os.pathsep.join([libdir] + [p for p in paths if p])


class ServerLog:
    """Every line the Triton process prints (and PyTriton's own log records) into one file, never to the
    terminal; remembers the last lines for a failure report, calls ``on_loading`` when Triton starts
    loading ``model``, and records the process's exit."""

    def __init__(self, path: Path, model: str, on_loading: Callable[[], None] = lambda: None):
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file = open(path, "w", encoding="utf-8", errors="replace", buffering=1)
        self._lock = threading.Lock()
        self._tail: collections.deque[str] = collections.deque(maxlen=400)
        self._loading = f"loading: {model}:"
        self._on_loading: Callable[[], None] | None = on_loading
        self.exit_code: int | None = None
        self.exited = threading.Event()
        self._detached = False
        self._partial = ""
        self._pending: list[str] = []
        self.on_exit: Callable[[], None] = lambda: None   # called once the server process has exited

    def write(self, text: bytes | str) -> None:
        """Some of the server's output, as it comes (PyTriton passes it unbuffered: a line in pieces)."""
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="replace")
        loading = None
        with self._lock:
            if self._file.closed:
                return
            self._file.write(text)
            *lines, self._partial = (self._partial + text).split("\n")
            for line in lines:
                if line.strip():
                    self._tail.append(line)
                if self._on_loading is not None and self._loading in line:
                    loading, self._on_loading = self._on_loading, None
            if not self._partial and self._pending:  # PyTriton's records that came mid-line
                self._file.write("".join(f"{record}\n" for record in self._pending))
                self._pending.clear()
        if loading is not None:
            loading()

    def write_line(self, line: str) -> None:
        """One whole line of PyTriton's own log; it waits for the end of a server line being written."""
        with self._lock:
            if self._file.closed:
                return
            self._tail.append(line)
            if self._partial:
                self._pending.append(line)
            else:
                self._file.write(line + "\n")

    def detach(self) -> None:
        """Leave the file to Triton's own --log-file (a PyTriton without a line sink to replace)."""
        self._file.close()
        self._detached = True

    def process_exited(self, success: bool, exit_code: int) -> None:
        self.exit_code = exit_code
        self.exited.set()
        self.on_exit()

    def relevant(self, count: int = 6) -> tuple[str, ...]:
        """The last ``count`` warnings and errors of the log that are not the usual harmless ones (the
        last lines of all where there are none), without Triton's timestamp prefix."""
        with self._lock:
            lines = list(self._tail)
        if self._detached and self.path.exists():
            lines = [line for line in self.path.read_text(errors="replace").splitlines()[-400:] if line.strip()]
        wanted = [line for line in lines if not HARMLESS.search(line) and
                  (LEVEL.match(line) and line[0] in "EW" or
                   not LEVEL.match(line) and re.search(r"error|fail|exception|traceback|refused|unable|cannot",
                                                       line, re.I))]
        chosen = wanted[-count:] or [line for line in lines if not HARMLESS.search(line)][-count:]
        return tuple(" ".join(LEVEL.sub(lambda m: f"{m.group(1)}: ", line).split())[:300] for line in chosen)

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.write(("\n" if self._partial and self._pending else "") +
                                 "".join(f"{record}\n" for record in self._pending))
                self._file.close()


class _LogRecords(logging.Handler):
    """PyTriton's Python log (its warnings would otherwise reach the terminal), into the server log."""

    def __init__(self, log: ServerLog):
        super().__init__(logging.INFO)
        self.log = log
        self.setFormatter(logging.Formatter("pytriton %(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.log.write_line(self.format(record))
        except Exception:  # noqa: BLE001 - a log line must never break the server
            pass


@contextlib.contextmanager
def _pytriton_warnings_into(log: ServerLog) -> Iterator[None]:
    """PyTriton's Python warnings (its ``CleanupWarning`` when a workspace is already gone on stop, say) go
    to the server log, not the terminal, while this context lasts; any other warning is shown as usual."""
    with warnings.catch_warnings():  # restores showwarning on the way out
        shown = warnings.showwarning

        def show(message: Any, category: type, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
            if category.__module__.startswith("pytriton") or f"{os.sep}pytriton{os.sep}" in filename:
                log.write_line(f"pytriton warning {category.__name__}: {message}")
            else:
                shown(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        yield


def _check_ports(options: ServeOptions) -> None:
    """Refuse, before starting anything, a port something already answers on (Triton would start, fail
    on it and take a while to say so; a client could even reach the other server)."""
    ports = {"--http-port": options.http_port, "--grpc-port": options.grpc_port, "--metrics-port": options.metrics_port}
    if len(set(ports.values())) < len(ports):
        raise ServeFailed(f"--http-port, --grpc-port and --metrics-port must differ (got {sorted(ports.values())})", 2)
    host = "127.0.0.1" if options.host in ("0.0.0.0", "") else "::1" if options.host == "::" else options.host
    for option, port in ports.items():
        try:  # a probe that connects, never binds: a bound probe can disturb the listener that follows it
            with socket.create_connection((host, port), timeout=0.5):
                pass
        except socket.gaierror as e:
            raise ServeFailed(f"--host {options.host}: not an address to listen on ({e.strerror})", 2) from None
        except OSError:
            continue  # nothing answers there: free
        raise ServeFailed(f"{option} {port}: something already answers on {options.host}:{port} (another server?); "
                          f"stop it or choose another port with {option}", 2)


def _pytriton() -> tuple[Any, Any, Any]:
    """PyTriton's Triton, TritonConfig and TritonServer (ImportError naming the extra where it is missing)."""
    _with_python_library_path()
    try:
        from pytriton.server.triton_server import TritonServer
        from pytriton.triton import Triton, TritonConfig
    except ImportError:
        raise MissingExtra(f"readout-export serve needs PyTriton: {SERVE_EXTRA}") from None
    return Triton, TritonConfig, TritonServer


def _triton(options: ServeOptions, log: ServerLog | None) -> Any:
    """A ``pytriton.triton.Triton`` whose server output goes to ``log`` (not the terminal); without ``log``,
    Triton's own log goes to ``options.log_file`` if given (PyTriton prints the rest)."""
    Triton, TritonConfig, TritonServer = _pytriton()

    # PyTriton prints every line the server process writes unless its TritonServer's line sink is replaced;
    # a PyTriton without that sink gets Triton's --log-file instead (a few lines then still reach the terminal).
    hookable = hasattr(Triton, "_initialize_server") and callable(getattr(TritonServer, "_record_logs", None))
    log_file = Path(options.log_file) if log is None and options.log_file else None
    if log is not None and not hookable:
        log.detach()
        log_file = log.path
    config = TritonConfig(http_address=options.host, http_port=options.http_port, grpc_address=options.host,
                          grpc_port=options.grpc_port, metrics_address=options.host, metrics_port=options.metrics_port,
                          exit_timeout_secs=5, log_file=log_file)
    if log is None or not hookable:
        return Triton(config=config)

    class QuietTriton(Triton):
        def _initialize_server(self) -> None:
            super()._initialize_server()
            self._triton_server._record_logs = log.write            # every line the server prints, to the file
            self._triton_server.register_on_exit(log.process_exited)

    return QuietTriton(config=config)


def _bind(triton: Any, engine: Any, options: ServeOptions, model: str, batch_size: int) -> None:
    from pytriton.model_config import DynamicBatcher, ModelConfig, Tensor

    triton.bind(model_name=model, infer_func=infer_function(engine, batch_size),
                inputs=[Tensor(name=f, dtype=bytes, shape=(1,), optional=f == ROLE_FIELD) for f in serving_fields(engine.abi)],
                outputs=[Tensor(name="result", dtype=bytes, shape=(1,)),
                         Tensor(name="release_id", dtype=bytes, shape=(1,))],
                config=ModelConfig(max_batch_size=options.max_batch_size,
                                   batcher=DynamicBatcher(max_queue_delay_microseconds=options.max_queue_delay_us)),
                strict=True)


def start(engine: Any, options: ServeOptions = ServeOptions(), name: str | None = None, batch_size: int = 32,
          log: ServerLog | None = None) -> Any:
    """Start Triton with ``engine`` bound and return the running ``pytriton.triton.Triton`` (call ``.stop()``).
    ``log``: where every line of the server's output goes (without it: Triton's log to ``options.log_file``
    if given, the rest to the terminal, as PyTriton does)."""
    triton = _triton(options, log)
    _bind(triton, engine, options, model_name(engine.abi, name), batch_size)
    try:
        triton.run()
    except BaseException:  # KeyboardInterrupt included: never leave a server behind
        triton.stop()
        raise
    return triton


def _model_ready(options: ServeOptions, model: str, timeout: float = 30.0) -> bool:
    """Whether Triton says ``model`` is ready within ``timeout`` seconds (PyTriton's start only warns when it
    could not tell)."""
    import time
    import urllib.error
    import urllib.request

    host = "127.0.0.1" if options.host in ("0.0.0.0", "") else "::1" if options.host == "::" else options.host
    host = f"[{host}]" if ":" in host else host
    url = f"http://{host}:{options.http_port}/v2/models/{model}/ready"
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through an http_proxy
    deadline = time.monotonic() + timeout
    while True:
        try:
            with opener.open(url, timeout=10) as reply:
                if reply.status == 200:
                    return True
        except (OSError, urllib.error.URLError, ValueError):  # not answering (yet) is not ready
            pass
        if time.monotonic() > deadline:
            return False
        time.sleep(0.25)


def run(engine: Any, options: ServeOptions = ServeOptions(), name: str | None = None,
        on_ready: Callable[[], None] | None = None, batch_size: int = 32,
        report: Callable[[str], None] | None = None) -> None:
    """Start Triton with ``engine``, call ``on_ready``, and serve until SIGINT or SIGTERM; then stop Triton
    (its workspace and shared memory are cleaned up).

    Everything the server process prints goes to ``options.log_file`` (default: :func:`default_log_file`);
    ``report`` gets one line per state change: ``starting ...`` (naming the log file), ``loading ...``,
    ``ready: ...`` (the URLs, the inputs), ``stopping ...``, ``stopped``, or ``failed: ...`` followed by the
    last relevant lines of the log, each indented. A failure raises :class:`ServeFailed` after reporting.

    The handlers are set before Triton starts (a signal during start-up still cleans up), for both signals
    (a process started in the background inherits SIGINT ignored; service managers and containers send
    SIGTERM), and further signals are ignored while stopping so the cleanup is not cut short."""
    say = report or (lambda line: None)
    model = model_name(engine.abi, name)
    path = Path(options.log_file) if options.log_file else default_log_file(model, options.http_port)
    _pytriton()
    _check_ports(options)
    try:
        log = ServerLog(path, model, lambda: say(f"loading {model} into Triton"))
    except OSError as e:
        raise ServeFailed(f"cannot write Triton's log to {path} ({e.strerror}); choose another file with --log-file",
                          2, path) from None
    with _pytriton_warnings_into(log):
        _Session(engine, options, model, path, log, say).serve(batch_size, on_ready)


@dataclass
class _Session:
    """One :func:`run`: the model, Triton's log, the signal handlers while it serves, and the phase it is in
    (``starting``, ``waiting`` inside PyTriton's start, ``started``, ``serving``, ``stopping``)."""

    engine: Any
    options: ServeOptions
    model: str
    path: Path
    log: ServerLog
    say: Callable[[str], None]
    phase: str = "starting"
    stopping: str | None = None

    def failed(self, message: str, code: int = 1) -> ServeFailed:
        """Report a failure with the last relevant lines of Triton's log; the error to raise."""
        lines = self.log.relevant()
        self.say(f"failed: {message}" + (f"; the last lines of Triton's log ({self.path}):" if lines else
                                         f" (Triton's log: {self.path})"))
        for line in lines:
            self.say(f"    {line}")
        return ServeFailed(f"{message} (Triton's log: {self.path})", code, self.path, lines)

    def interrupt(self, signum: int, frame: Any) -> None:
        import signal

        if self.stopping is None:
            self.stopping = signal.Signals(signum).name
            self.say(f"stopping ({self.stopping})")
        raise KeyboardInterrupt

    def exited_early(self, signum: int, frame: Any) -> None:
        # Raised only inside the guarded call to PyTriton's start (phase "waiting"), and at most once: an
        # exception raised anywhere else (in an except clause, say) would escape as a traceback.
        if self.phase == "waiting":
            self.phase = "exited"
            raise _ServerExited

    def on_exit(self) -> None:  # PyTriton's start waits up to 2 minutes for a server that has already exited: cut it short
        import signal

        if self.phase == "waiting":
            signal.pthread_kill(threading.main_thread().ident, signal.SIGUSR1)

    def serve(self, batch_size: int, on_ready: Callable[[], None] | None) -> None:
        """Start Triton, serve until a signal or until Triton stops, and always clean up."""
        import signal

        pytriton_logger = logging.getLogger("pytriton")
        saved = pytriton_logger.handlers[:], pytriton_logger.propagate, pytriton_logger.level
        pytriton_logger.handlers, pytriton_logger.propagate = [_LogRecords(self.log)], False
        pytriton_logger.setLevel(logging.INFO)
        previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)}
        signal.signal(signal.SIGINT, self.interrupt)
        signal.signal(signal.SIGTERM, self.interrupt)
        signal.signal(signal.SIGUSR1, self.exited_early)
        self.log.on_exit = self.on_exit
        triton = None
        try:
            engine = self.engine
            self.say(f"starting Triton for {self.model} ({engine.family}, {engine.target.name} on {engine.backend}); "
                     f"its log: {self.path}")
            triton = _triton(self.options, self.log)
            _bind(triton, engine, self.options, self.model, batch_size)
            self.start(triton)
            self.phase = "serving"
            if self.log.exited.is_set():
                raise self.failed(f"Triton exited (code {self.log.exit_code}) before {self.model} was ready")
            inputs = ", ".join(f + (" (optional)" if f == ROLE_FIELD else "") for f in serving_fields(engine.abi))
            self.say(f"ready: {self.model} at http://{self.options.host}:{self.options.http_port} and grpc "
                     f"{self.options.host}:{self.options.grpc_port}; inputs: {inputs}; output: result (JSON)")
            if on_ready is not None:
                on_ready()
            while triton.is_alive():  # until a signal, or Triton or the model stops by itself
                self.log.exited.wait(1.0)
            raise self.failed(f"Triton stopped by itself (exit code {self.log.exit_code})" if self.log.exited.is_set()
                              else f"{self.model} stopped by itself")
        except KeyboardInterrupt:
            if self.stopping is None:  # raised by the code, not by the handler above
                self.stopping = "interrupted"
                self.say("stopping (interrupted)")
        finally:
            self.phase = "stopping"
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, signal.SIG_IGN)
            if triton is not None:
                triton.stop()
            if self.stopping is not None:
                self.say("stopped")
            self.log.close()
            pytriton_logger.handlers, pytriton_logger.propagate = saved[0], saved[1]
            pytriton_logger.setLevel(saved[2])
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def start(self, triton: Any) -> None:
        """PyTriton's start, its own failures reported with the log; then Triton's word that the model is ready."""
        try:
            try:
                self.phase = "waiting"
                triton.run()
            finally:  # a signal handled before this store still raises here, inside the outer try
                self.phase = "started"
        except _ServerExited:
            pass
        except KeyboardInterrupt:
            raise
        except Exception as e:  # noqa: BLE001 - PyTriton's own start-up failures, reported with the log
            if not self.log.exited.is_set():
                first = (str(e).strip().splitlines() or [""])[0][:200]
                raise self.failed(f"Triton did not start {self.model} ({type(e).__name__}"
                                  f"{': ' + first if first else ''})") from None
        if not self.log.exited.is_set() and not _model_ready(self.options, self.model):
            raise self.failed(f"Triton is up but says {self.model} is not ready")


