"""Prometheus metrics of one server (prometheus-client, in a registry of its own so several servers in
one process, as in tests, do not share counters)."""
from __future__ import annotations

from typing import Any

from readout_sdk.serving.http.problems import KINDS

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
TOKEN_BUCKETS = (16, 64, 256, 1024, 4096, 16384, 65536, 262144)
# `problems.KINDS` (a request not sent in time, "timeout", and a connection over the cap, "connections", among
# them), and a client gone ("cancelled": nothing is answered, so it is no refusal)
ERROR_KINDS = (*KINDS, "cancelled")


class Metrics:
    """Requests by route, model and status; latency histograms; batch sizes in inputs and tokens; queue
    depth; errors by kind; client disconnects."""

    def __init__(self) -> None:
        from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram

        self.content_type = CONTENT_TYPE_LATEST  # of the exposition text
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("readout_http_requests", "HTTP requests answered", ["route", "model", "status"], registry=r)
        self.latency = Histogram("readout_http_request_seconds", "Time from request to response",
                                 ["route", "model"], buckets=LATENCY_BUCKETS, registry=r)
        self.errors = Counter("readout_http_errors", "Requests refused or failed, by kind", ["kind"], registry=r)
        for kind in ERROR_KINDS:  # every kind's series from the start, at 0: a first refusal adds no series
            self.errors.labels(kind)
        self.items = Counter("readout_items", "Inputs run by the model", ["model"], registry=r)
        self.batch_items = Histogram("readout_batch_items", "Inputs per model call (merged requests)", ["model"],
                                     buckets=SIZE_BUCKETS, registry=r)
        self.batch_requests = Histogram("readout_batch_requests", "Requests merged into one model call", ["model"],
                                        buckets=SIZE_BUCKETS, registry=r)
        self.batch_tokens = Histogram("readout_batch_tokens", "Tokens per model call", ["model"],
                                      buckets=TOKEN_BUCKETS, registry=r)
        self.queue_items = Gauge("readout_queue_items", "Inputs waiting for the model", ["model"], registry=r)
        self.queue_seconds = Histogram("readout_queue_seconds", "Time a request waited before its batch ran",
                                       ["model"], buckets=LATENCY_BUCKETS, registry=r)
        self.cancelled = Counter("readout_cancelled_requests", "Requests whose client went away before the answer",
                                 ["model"], registry=r)

    def exposition(self) -> bytes:
        """The text format Prometheus scrapes (its content type: :attr:`content_type`)."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)

    def batch(self, model: str, requests: int, items: int, tokens: int) -> None:
        self.batch_items.labels(model).observe(items)
        self.batch_requests.labels(model).observe(requests)
        self.batch_tokens.labels(model).observe(tokens)
        self.items.labels(model).inc(items)

    def answered(self, route: str, model: str, status: int, seconds: float, kind: str | None) -> None:
        self.requests.labels(route, model, str(status)).inc()
        self.latency.labels(route, model).observe(seconds)
        if kind is not None:
            self.errors.labels(kind).inc()


def metric_value(text: str, name: str, **labels: Any) -> float:
    """A sample's value from the exposition text (0 when absent): what tests and the bench read."""
    from prometheus_client.parser import text_string_to_metric_families

    total = 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == str(v) for k, v in labels.items()):
                total += s.value
    return total
