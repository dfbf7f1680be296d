"""The same application as a Ray Serve deployment: each replica loads the artifacts itself from their
paths (nothing else is shared: no engine, no queue, no cache) and answers the same routes the same way.
Ray Serve's proxy spreads requests over the replicas; its autoscaler adds and removes them by ongoing
requests. Needs the ``ray`` extra (``ray[serve]``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from readout_sdk.errors import MissingExtra
from readout_sdk.serving.http.options import HttpOptions

RAY_EXTRA = "pip install 'readout-export[ray,http]'"


def deployment(specs: Sequence[str], options: HttpOptions = HttpOptions(), replicas: int = 1,
               min_replicas: int | None = None, max_replicas: int | None = None,
               target_ongoing_requests: float = 32, name: str = "readout", **load_kwargs: Any) -> Any:
    """A bound Ray Serve application serving ``specs`` (``PATH`` or ``NAME=PATH``; paths made absolute,
    as replicas may start elsewhere). ``min_replicas``/``max_replicas``: autoscale between them (by
    ``target_ongoing_requests`` per replica) instead of a fixed ``replicas``. Run it with
    ``ray.serve.run(app, route_prefix="/")``."""
    try:
        from ray import serve
    except ImportError:
        raise MissingExtra(f"Ray Serve deployments need Ray Serve: {RAY_EXTRA}") from None
    specs = [_absolute(s) for s in specs]

    def build_app() -> Any:  # on each replica, at its start
        from readout_sdk.serving.http.server import build

        return build(specs, options, **load_kwargs)

    if min_replicas is not None or max_replicas is not None:
        low = min_replicas if min_replicas is not None else 1
        scale: dict[str, Any] = {"autoscaling_config": {"min_replicas": low, "max_replicas": max(low, max_replicas or low),
                                                        "target_ongoing_requests": target_ongoing_requests}}
    else:
        scale = {"num_replicas": replicas}
    # a replica accepts more concurrent requests than one batch holds, so its batcher can merge them
    ingress = serve.ingress(build_app)()
    return serve.deployment(ingress, name=name, max_ongoing_requests=options.batching.max_queue_items,
                            **scale).bind()


def _absolute(spec: str) -> str:
    if "=" in spec and not Path(spec).exists():
        name, _, path = spec.rpartition("=")
        return f"{name}={Path(path).resolve()}"
    return str(Path(spec).resolve())
