"""Call a model that `readout-export serve` (or a Triton model repository) serves, over HTTP; print its records.

Waits until the model is ready (a server just started takes a few seconds), asks the server which
inputs the model takes (the family's fields: `text`; `query`, `document`; `question`, `context`;
`question`, `choices` as a JSON list), reads the values in that order, one row after another, sends them
as one request (each field a BYTES input of shape [n, 1]) and prints one JSON record per row, in the order
sent, then the release that answered (`serve` replies carry it). Needs tritonclient's HTTP client (the
`serve` extra).

Examples, with `readout-export serve ARTIFACT` running for the demo artifact of that family:
    python examples/serving/client.py demo-sequence-classification "great film" "awful service"
    python examples/serving/client.py demo-cross-encoder "Where is Paris?" "In France." "Where is Paris?" "Bananas."
    python examples/serving/client.py demo-multiple-choice "The capital of France is" '["Paris.", "Berlin."]'
"""
from __future__ import annotations

import argparse
import json
import sys
import time


def main() -> int:
    first, _, rest = __doc__.strip().partition("\n")
    p = argparse.ArgumentParser(description=first, epilog=rest.strip(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", help="the served model's name (serve's --name; default there: the artifact's name)")
    p.add_argument("values", nargs="+", metavar="value", help="the rows to send: each row's fields in order")
    p.add_argument("--url", default="127.0.0.1:8000", help="the server's HTTP address (default: 127.0.0.1:8000)")
    p.add_argument("--wait", type=float, default=120.0, help="seconds to wait for the model to be ready (default: 120)")
    args = p.parse_args()
    try:
        import numpy as np
        import tritonclient.http as http
    except ImportError as e:
        print(f"error: {e.name} is not installed (tritonclient's HTTP client): pip install 'readout-export[serve]'",
              file=sys.stderr)
        return 2
    client = http.InferenceServerClient(args.url)
    deadline = time.monotonic() + args.wait
    while True:
        try:
            if client.is_model_ready(args.model):
                break
            served = _served_names(client)  # the server is up: is the model even there?
            if served is not None and args.model not in served:
                print(f"error: {args.url} serves no model {args.model!r} (it serves: {', '.join(sorted(served)) or 'none'})",
                      file=sys.stderr)
                return 2
        except Exception:  # nothing listening yet: the server is still starting
            pass
        if time.monotonic() > deadline:
            print(f"error: model {args.model!r} was not ready at {args.url} within {args.wait:g} s "
                  "(is `readout-export serve` running, and under that name?)", file=sys.stderr)
            return 2
        time.sleep(0.5)
    fields = [i["name"] for i in client.get_model_metadata(args.model)["inputs"]]
    if len(args.values) % len(fields):
        print(f"error: {args.model} takes rows of {len(fields)} values ({', '.join(fields)}); "
              f"got {len(args.values)} values", file=sys.stderr)
        return 2
    rows = [args.values[i:i + len(fields)] for i in range(0, len(args.values), len(fields))]
    inputs = []
    for k, field in enumerate(fields):
        column = http.InferInput(field, [len(rows), 1], "BYTES")
        column.set_data_from_numpy(np.array([[row[k].encode()] for row in rows], dtype=object))
        inputs.append(column)
    try:
        reply = client.infer(args.model, inputs)
    except Exception as e:  # a refused request: Triton's message, in one line
        print(f"error: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 2
    refused = 0
    for row, record in zip(rows, reply.as_numpy("result")):
        doc = json.loads(record[0])
        refused += isinstance(doc, dict) and set(doc) == {"error"}  # a row the server refused, on its own
        print(json.dumps(doc), " <-", " | ".join(row))
    release = reply.as_numpy("release_id")  # None where the model has no such output (a repository's text model)
    if release is not None:
        print("release:", release[0][0].decode())
    if refused:
        print(f"error: the server refused {refused} of {len(rows)} rows (their records say why)", file=sys.stderr)
        return 1
    return 0


def _served_names(client) -> set[str] | None:
    """The names of the models the server serves once every model its repository index lists is READY;
    None while it cannot say (still loading, or no index): the caller keeps waiting then."""
    try:
        index = client.get_model_repository_index()
    except Exception:  # an older server, or one still starting
        return None
    if not index or any(m.get("state") != "READY" for m in index):
        return None
    return {m["name"] for m in index if "name" in m}


if __name__ == "__main__":
    sys.exit(main())
