"""Scale-out commands: `triton` (write a model repository), `serve` (Triton via PyTriton), `serve-http`
(OpenAI and text-embeddings-inference over HTTP, or on Ray Serve), `encode` (Ray Data).

All are torch-free: they need the base install plus their extra (triton, serve, http, ray).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import click

from readout_export.cli.run import ARTIFACT_DIR, Directory, FilePath, run_command


SERVE_THREADS = "CPU threads the served engine may use in all (default: every CPU this process may run on)."
ENCODE_THREADS = "CPU threads per Ray actor (default: the CPUs Ray assigns each actor)."


def load_options(threads_help: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options of `readout_sdk.load`, shared by serve and encode (``threads_help``: what --threads
    means for this command)."""
    return lambda fn: _with_load_options(fn, threads_help)


def _with_load_options(fn: Callable[..., Any], threads_help: str) -> Callable[..., Any]:
    for option in reversed([
        click.option("--target", help="Run this target (see `readout-export inspect`); default: as load() picks."),
        click.option("--backend", default="auto", show_default=True,
                     type=click.Choice(["auto", "onnxruntime", "openvino", "tensorrt"])),
        click.option("--device", default="auto", show_default=True, type=click.Choice(["auto", "cpu", "cuda"])),
        click.option("--streams", type=click.IntRange(min=1), help="Batches run at once (default: the backend's choice)."),
        click.option("--threads", type=click.IntRange(min=1), help=threads_help),
        click.option("--trusted-key", "trusted_keys", multiple=True, type=FilePath(dir_okay=True),
                     help="Refuse an artifact unless this Ed25519 public key (a file, or a directory of .pub/.pem "
                          "files) signed it; repeatable. Default: the keys READOUT_TRUSTED_KEYS names, if any."),
    ]):
        fn = option(fn)
    return fn


def _load_kwargs(target: str | None, backend: str, device: str, streams: int | None,
                 threads: int | None, trusted_keys: tuple[str, ...] = ()) -> dict[str, Any]:
    """`readout_sdk.load`'s keyword arguments from the shared options (no --trusted-key: the environment's
    policy, READOUT_TRUSTED_KEYS, applies inside load)."""
    return {"target": target, "backend": backend, "device": device, "streams": streams, "threads": threads,
            "trusted_keys": [str(Path(k).absolute()) for k in trusted_keys] or None}  # absolute: Ray workers too


@click.command()
@click.argument("artifact", type=ARTIFACT_DIR)
@click.option("--repo", required=True, type=Directory(), help="Model repository directory to write into.")
@click.option("--name", help="Model name (default: the artifact's name); the compiled graph is NAME_graph.")
@click.option("--target", help="ONNX Runtime target or compiled TensorRT engine to serve (default: onnx-fp32).")
@click.option("--max-batch-size", type=click.IntRange(min=1),
              help="Graph model's max_batch_size (default: 64, or the engine profile's max).")
@click.option("--force", is_flag=True, help="Replace models of the same name in the repository.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def triton(artifact: str, repo: str, name: str | None, target: str | None, max_batch_size: int | None, force: bool,
           debug: bool) -> None:
    """Write a Triton model repository for ARTIFACT: the compiled graph (onnxruntime_onnx or tensorrt_plan)
    and a Python-backend model that takes text and returns typed JSON, the ABI record in both configs."""
    from readout_export.triton_repo import write_repository

    r = run_command(debug, False, lambda: write_repository(artifact, repo, name, target, max_batch_size, force))
    click.echo(f"wrote {r.repo}: {r.text_model} (python: text in, JSON out) -> {r.graph_model} "
               f"({r.platform}, {r.target}, max_batch_size {r.max_batch_size})")
    click.echo(f"  serve:  tritonserver --model-repository {r.repo}  (readout-export must be installed in the "
               "Python backend's environment)")


@click.command()
@click.argument("artifact", type=ARTIFACT_DIR)
@click.option("--name", help="Model name clients call (default: the artifact's name).")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every interface).")
@click.option("--http-port", default=8000, show_default=True, type=click.IntRange(min=1, max=65535))
@click.option("--grpc-port", default=8001, show_default=True, type=click.IntRange(min=1, max=65535))
@click.option("--metrics-port", default=8002, show_default=True, type=click.IntRange(min=1, max=65535))
@click.option("--max-batch-size", default=64, show_default=True, type=click.IntRange(min=1),
              help="Rows Triton's dynamic batcher may merge.")
@click.option("--max-queue-delay-us", default=2000, show_default=True, type=click.IntRange(min=0),
              help="How long Triton waits to fill a batch.")
@click.option("--log-file", type=FilePath(),
              help="Where Triton's own log goes, rewritten at each start (default: "
                   "$XDG_STATE_HOME/readout-export/serve/NAME-HTTPPORT.log, ~/.local/state/... without XDG_STATE_HOME); "
                   "the terminal gets one line per state change.")
@load_options(SERVE_THREADS)
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def serve(artifact: str, name: str | None, host: str, http_port: int, grpc_port: int, metrics_port: int,
          max_batch_size: int, max_queue_delay_us: int, log_file: str | None, target: str | None, backend: str,
          device: str, streams: int | None, threads: int | None, trusted_keys: tuple[str, ...], debug: bool) -> None:
    """Serve ARTIFACT with Triton Inference Server (PyTriton) until interrupted.

    Clients use tritonclient (HTTP or gRPC): BYTES inputs named after the family's fields (text; query and
    document; question and context; question and choices as a JSON list), BYTES output `result` with one
    JSON record per row. Dynamic batching merges concurrent requests. Triton's own log goes to a file
    (--log-file); stderr gets one line per state change (starting, loading, ready, stopping, stopped, or
    failed with the log's last relevant lines: exit 1).
    """
    import sys

    import readout_sdk
    from readout_export.errors import ReadoutExportError
    from readout_sdk.serving.serve import ServeFailed, ServeOptions, run

    engine = run_command(debug, False, lambda: readout_sdk.load(artifact, **_load_kwargs(target, backend, device, streams, threads, trusted_keys)))
    options = ServeOptions(host, http_port, grpc_port, metrics_port, max_batch_size, max_queue_delay_us, log_file)

    def serve_it() -> None:
        try:
            run(engine, options, name, report=lambda line: click.echo(line, err=True))
        except (ServeFailed, ImportError) as e:
            if getattr(e, "exit_code", 2) == 2:  # found before starting (no PyTriton, a port in use...): one line, exit 2
                refused = ReadoutExportError(str(e))
                refused.exit_code = 2
                raise refused from None
            if debug:
                raise
            sys.exit(e.exit_code)  # run has reported it: "failed: ..." and the log's last lines

    run_command(debug, False, serve_it)


@click.command("serve-http")
@click.argument("artifacts", nargs=-1, required=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every interface).")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(min=0, max=65535),
              help="Port to listen on (0: any free port; the ready line says which).")
@click.option("--api-key", envvar="READOUT_API_KEY", show_envvar=True,
              help="Bearer token every model and metrics route requires (not /health, /ping, GET /, /openapi.json, "
                   "/docs; default: none).")
@click.option("--cors-origin", "cors_origins", multiple=True,
              help="An origin whose browser pages may call the server (repeatable; default: CORS off).")
@click.option("--max-items", default=2048, show_default=True, type=click.IntRange(min=1), help="Inputs per request.")
@click.option("--max-characters", default=1_000_000, show_default=True, type=click.IntRange(min=1),
              help="Characters per request, all inputs together.")
@click.option("--max-tokens", default=300_000, show_default=True, type=click.IntRange(min=1),
              help="Tokens the model runs per request.")
@click.option("--max-body-bytes", default=2_000_000, show_default=True, type=click.IntRange(min=1),
              help="Request body size.")
@click.option("--max-batch-items", default=64, show_default=True, type=click.IntRange(min=1),
              help="Rows (inputs; a windowed text one per window) merged from concurrent requests into one model call.")
@click.option("--max-batch-tokens", default=32_768, show_default=True, type=click.IntRange(min=1),
              help="Padded tokens (rows x the widest row) merged into one model call.")
@click.option("--max-wait-ms", default=2.0, show_default=True, type=click.FloatRange(min=0),
              help="How long a request may wait for others to fill its batch.")
@click.option("--max-queue-items", default=4096, show_default=True, type=click.IntRange(min=1),
              help="Inputs that may wait per model; beyond, requests are answered 429 with Retry-After.")
@click.option("--drain-timeout", default=30.0, show_default=True, type=click.FloatRange(min=0),
              help="Seconds in-flight requests may take to finish after SIGTERM.")
@click.option("--header-timeout-s", default=10.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Seconds a request's headers may take to arrive (from its first byte); then 408 and the socket closes.")
@click.option("--body-timeout-s", default=30.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Seconds a request's whole body may take to arrive after its headers; then 408 and the socket closes.")
@click.option("--max-connections", default=512, show_default=True, type=click.IntRange(min=1),
              help="Open connections; one more is answered 503 and closed (those open keep being served).")
@click.option("--ray", "on_ray", is_flag=True, help="Deploy on Ray Serve instead (each replica loads the artifacts).")
@click.option("--address", help="With --ray: the Ray cluster (e.g. auto); default: start a local one.")
@click.option("--replicas", default=1, show_default=True, type=click.IntRange(min=1), help="With --ray: replicas.")
@click.option("--min-replicas", type=click.IntRange(min=0), help="With --ray: autoscale from this many...")
@click.option("--max-replicas", type=click.IntRange(min=1), help="...to this many, by ongoing requests.")
@load_options(SERVE_THREADS)
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def serve_http(artifacts: tuple[str, ...], host: str, port: int, api_key: str | None, cors_origins: tuple[str, ...],
               max_items: int, max_characters: int, max_tokens: int, max_body_bytes: int, max_batch_items: int,
               max_batch_tokens: int, max_wait_ms: float, max_queue_items: int, drain_timeout: float,
               header_timeout_s: float, body_timeout_s: float, max_connections: int, on_ray: bool,
               address: str | None, replicas: int, min_replicas: int | None, max_replicas: int | None,
               target: str | None, backend: str, device: str, streams: int | None, threads: int | None,
               trusted_keys: tuple[str, ...],
               debug: bool) -> None:
    """Serve ARTIFACTS (each PATH or NAME=PATH) over HTTP until SIGTERM: OpenAI's /v1/embeddings and
    /v1/models, text-embeddings-inference's routes (/embed, /embed_sparse, /embed_all, /rerank, /predict,
    /tokenize, /info, /health, /metrics), and /entities, /answers, /choices, /token_vectors.

    The first artifact answers the routes at the root; every one answers under /models/NAME/. Concurrent
    requests are merged into batches; overload is answered 429 at once. Every answer names the release
    (header X-Readout-Release-Id). Listens on loopback unless --host says otherwise.
    """
    import os

    from readout_sdk.serving.http.options import API_KEY_ENV, Batching, HttpOptions, Limits

    # an empty key is a key meant and lost (an unset variable in a unit file, `--api-key "$KEY"`): serving
    # without auth then would be the one thing the operator did not want
    if (api_key is not None and not api_key.strip()) or (api_key is None and os.environ.get(API_KEY_ENV) == ""):
        raise click.BadParameter(f"an empty key (from --api-key or {API_KEY_ENV}) would serve without auth; give the "
                                 f"key, or set neither for a server without auth", param_hint="--api-key")
    options = HttpOptions(host, port, api_key or None, tuple(cors_origins),
                          Limits(max_items, max_characters, max_tokens, max_body_bytes),
                          Batching(max_batch_items, max_batch_tokens, max_wait_ms, max_queue_items), drain_timeout,
                          header_timeout_s, body_timeout_s, max_connections)
    kwargs = _load_kwargs(target, backend, device, streams, threads, trusted_keys)
    if on_ray:
        run_command(debug, False, lambda: _serve_on_ray(list(artifacts), options, address, replicas, min_replicas,
                                                        max_replicas, kwargs))
        return
    from readout_sdk.serving.http.server import run

    def ready(url: str, routes: dict[str, list[str]]) -> None:
        click.echo(f"serving {', '.join(artifacts)} at {url} ({_advertised(url, routes)}); auth: "
                   + ("a bearer token on every model and metrics route (not /health, /ping, GET /, /openapi.json, /docs)"
                      if options.api_key else "none (no --api-key)"),
                   err=True)

    run_command(debug, False, lambda: run(list(artifacts), options, ready, **kwargs))


def _advertised(url: str, routes: dict[str, list[str]]) -> str:
    """The routes each model's family has (the first model at the root too), in the ready line: a classifier
    is announced at /predict, never at the embedding routes it would refuse."""
    shown = []
    for i, (name, own) in enumerate(routes.items()):
        base = f"{url}/models/{name}"
        where = f"{url}{own[0]} and {base}{own[0]}" if i == 0 and own else f"{base}{own[0]}" if own else base + "/"
        shown.append(f"{name}: {where}" + "".join(f", {r}" for r in own[1:]))
    return "; ".join(shown) + "; every model: /tokenize, /info, POST /"


def _serve_on_ray(artifacts: list[str], options: Any, address: str | None, replicas: int,
                  min_replicas: int | None, max_replicas: int | None, kwargs: dict[str, Any]) -> None:
    """Deploy on Ray Serve (its proxy listens on --host/--port) and block until interrupted."""
    import signal
    import time

    import ray
    from ray import serve

    from readout_sdk.serving.http.ray_serve import deployment

    ray.init(address=address, include_dashboard=False, log_to_driver=False)
    try:
        serve.start(http_options={"host": options.host, "port": options.port})
        serve.run(deployment(artifacts, options, replicas, min_replicas, max_replicas, **kwargs), route_prefix="/",
                  name="readout")
        click.echo(f"serving {', '.join(artifacts)} on Ray Serve at http://{options.host}:{options.port}", err=True)
        signal.signal(signal.SIGTERM, lambda *a: (_ for _ in ()).throw(KeyboardInterrupt()))
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
    finally:
        serve.shutdown()
        ray.shutdown()


@click.command()
@click.argument("artifact", type=ARTIFACT_DIR)
@click.option("--input", "source", required=True, type=FilePath(),
              help="A .jsonl or .parquet file, one row per input.")
@click.option("--output", required=True, type=Directory(), help="Directory for the Parquet files.")
@click.option("--column", "columns", multiple=True,
              help="Column holding the text (default: text); for pair families FIELD=COLUMN, e.g. query=q.")
@click.option("--prefix", default="", help="Prefix for the output columns (when an input column has their name).")
@click.option("--role", help="Input role every row is encoded under (e.g. document), where the artifact declares "
                             "roles; default: its declared default role.")
@click.option("--address", help="Ray cluster to use (e.g. auto, ray://host:10001); default: start a local one.")
@click.option("--num-cpus", type=int, help="CPUs of the local cluster (default: all).")
@click.option("--actors", default=1, show_default=True, type=click.IntRange(min=1),
              help="Ray actors, each loading the artifact once (on one machine, 1 actor uses every core).")
@click.option("--cpus-per-actor", type=click.FloatRange(min=0, min_open=True),
              help="CPUs Ray reserves per actor (default 1). Runtime threads: on a local cluster its CPUs shared "
                   "out among the actors, with --address the reserved CPUs (or --threads).")
@click.option("--batch-size", default=256, show_default=True, type=click.IntRange(min=1),
              help="Rows per actor call (sorted by length within the call).")
@load_options(ENCODE_THREADS)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object describing the result.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def encode(artifact: str, source: str, output: str, columns: tuple[str, ...], prefix: str, role: str | None,
           address: str | None,
           num_cpus: int | None, actors: int, cpus_per_actor: float | None, batch_size: int, target: str | None,
           backend: str, device: str, streams: int | None, threads: int | None, trusted_keys: tuple[str, ...],
           as_json: bool, debug: bool) -> None:
    """Encode a JSONL or Parquet file with ARTIFACT on Ray Data; write Parquet files (every input column
    kept, the typed outputs appended: vectors, labels, entities...)."""
    from readout_sdk.serving.ray import encode_file

    mapping = _column_mapping(columns)
    result = run_command(debug, as_json, lambda: encode_file(
        artifact, source, output, mapping, prefix, address, actors, cpus_per_actor, batch_size,
        num_cpus=num_cpus, role=role, **_load_kwargs(target, backend, device, streams, threads, trusted_keys)))
    if as_json:
        click.echo(json.dumps({"ok": True, "rows": result.rows, "output": str(result.output),
                               "files": list(result.files), "seconds": round(result.seconds, 3)}))
    else:
        click.echo(f"encoded {result.rows} rows into {result.output} ({len(result.files)} Parquet files) "
                   f"in {result.seconds:.1f}s ({result.rows / max(result.seconds, 1e-9):.1f} rows/s)")


def _column_mapping(columns: tuple[str, ...]) -> dict[str, str] | None:
    """--column text_col  or  --column field=col (repeatable) -> {field: column}."""
    if not columns:
        return None
    mapping: dict[str, str] = {}
    for c in columns:
        field, sep, col = c.partition("=")
        if not sep:
            if len(columns) > 1:
                raise click.BadParameter("give FIELD=COLUMN for each field when naming several", param_hint="--column")
            return {"text": c}
        mapping[field] = col
    return mapping


COMMANDS = (triton, serve, serve_http, encode,)
