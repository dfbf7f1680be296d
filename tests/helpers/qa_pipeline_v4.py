"""transformers 4.x's REAL question-answering pipeline, run in a subprocess beside this venv's transformers 5.

transformers 5 removed ``QuestionAnsweringPipeline``, so the oracle for ``engine.answer`` is the last 4.x
release, installed from the package index (``pip install --target``, no dependencies: this venv's torch,
numpy, safetensors, regex... are reused) into a cached folder keyed on the pins below, and put first on
``PYTHONPATH`` of a subprocess (the venv's transformers 5, huggingface_hub 2 and tokenizers 0.23 are
shadowed there). Nothing is ever fetched from the model hub: the subprocess runs with ``HF_HUB_OFFLINE``
and reads a model folder saved at test time.

Run as a script (what :func:`run_pipelines` does) it reads ``{"requests": [{"model": DIR, "cases": [...]},
...]}`` on stdin, prints ``IMPORTED`` once the QA pipeline imports, then writes, per request (a pipeline of
its own per model) and per case, the pipeline's answers, each window's input ids, the pipeline's own
per-window candidates before it merges equal texts (recorded around its real ``select_starts_ends`` and
``get_indices``, which still do the work) and its no-answer score.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

# transformers 4.57 wants tokenizers <= 0.23.0 and huggingface_hub < 1.0; pip picks the newest of each range.
PINS = ("transformers>=4.57,<5", "tokenizers>=0.22,<=0.23.0", "huggingface_hub>=0.34,<1.0")
KEY = "tf4-qa-" + "-".join(p.replace(">=", "ge").replace("<=", "le").replace("<", "lt").replace(",", "_")
                           for p in PINS)


def install(cache_root: Path | None) -> Path:
    """The folder holding transformers 4.x (installed once per ``cache_root``); raises RuntimeError saying
    why when pip cannot install it (no index reachable, no such release)."""
    root = Path(cache_root) if cache_root is not None else Path(tempfile.gettempdir())
    target = root / KEY
    if (target / ".complete").exists():
        return target
    root.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=KEY + ".", dir=root))
    try:
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-compile",
                               "--disable-pip-version-check", "--target", str(staging), *PINS],
                              capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        raise RuntimeError("pip install of transformers 4.x took over 10 minutes") from None
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"pip install {' '.join(PINS)} failed: {tail[0]}")
    (staging / ".complete").write_text(" ".join(PINS))
    try:
        staging.rename(target)  # atomic; a concurrent installer that got there first wins
    except OSError:
        pass
    return target if (target / ".complete").exists() else staging


IMPORTED = "transformers.pipelines.question_answering imported"  # the subprocess's first line


class PipelineUnavailable(RuntimeError):
    """transformers 4.x is installed but ``import transformers.pipelines.question_answering`` fails beside this
    venv (the args: the last line of its stderr); the subprocess stopped before any case ran."""


def run_pipeline(site: Path, model_dir: Path, cases: list[dict], model_input_names: list[str],
                 timeout: float = 600) -> dict:
    """The pipeline's results for ``cases`` (dicts: question, context, max_seq_len, doc_stride,
    max_answer_len, top_k, handle_impossible_answer). ``model_input_names`` is used only for a tokenizer
    transformers 5 saved as its generic ``TokenizersBackend`` (loaded as 4.x's ``PreTrainedTokenizerFast``,
    which would otherwise feed ``token_type_ids`` to every model)."""
    return run_pipelines(site, [(model_dir, cases, model_input_names)], timeout)[0]


def run_pipelines(site: Path, requests: list[tuple[Path, list[dict], list[str]]], timeout: float = 600) -> list[dict]:
    """:func:`run_pipeline` for several (model_dir, cases, model_input_names) at once, in ONE subprocess (its
    start, importing torch and transformers 4.x, costs more than the cases): each model gets its own
    pipeline, as in a subprocess of its own; one result per request, in order."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
               TRANSFORMERS_VERBOSITY="error")
    docs = [{"model": str(model_dir), "cases": cases, "model_input_names": names}
            for model_dir, cases, names in requests]
    done = subprocess.run([sys.executable, __file__], input=json.dumps({"requests": docs}),
                          capture_output=True, text=True, env=env, timeout=timeout)
    if done.returncode != 0:
        if IMPORTED not in done.stdout.splitlines():  # it never got past importing the QA pipeline
            raise PipelineUnavailable(done.stderr.strip().splitlines()[-1:])
        raise RuntimeError(f"the transformers 4.x pipeline failed:\n{done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert len(out) == len(requests), f"{len(out)} results for {len(requests)} requests"
    return out


def _main() -> None:
    import transformers.pipelines.question_answering  # noqa: F401  (what "importable beside this venv" means)

    print(IMPORTED, flush=True)
    import numpy as np
    import torch
    import transformers
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer, pipeline
    from transformers.pipelines import question_answering as QA

    assert transformers.__version__.startswith("4."), transformers.__version__

    windows: list[dict] = []  # this case's windows, in the order postprocess visits them
    real_select, real_indices = QA.select_starts_ends, QA.QuestionAnsweringPipeline.get_indices

    def select(*args, **kwargs):
        starts, ends, scores, min_null = real_select(*args, **kwargs)
        windows.append({"spans": [[int(s), int(e), float(x)] for s, e, x in zip(starts, ends, scores)],
                        "chars": [], "min_null_so_far": float(min_null)})
        return starts, ends, scores, min_null

    def indices(self, enc, s, e, sequence_index, align_to_words):
        found = real_indices(self, enc, s, e, sequence_index, align_to_words)
        windows[-1]["chars"].append([int(found[0]), int(found[1])])
        return found

    QA.select_starts_ends = select
    QA.QuestionAnsweringPipeline.get_indices = indices

    def answer(req: dict) -> dict:
        try:
            tok = AutoTokenizer.from_pretrained(req["model"])
        except ValueError as e:  # transformers 5 saves a plain tokenizer.json tokenizer as "TokenizersBackend",
            if "TokenizersBackend" not in str(e):  # its name for 4.x's PreTrainedTokenizerFast
                raise
            from transformers import PreTrainedTokenizerFast

            # 4.x's generic class forces the pre-tokenizer's add_prefix_space to its own kwarg (default False),
            # where the model-specific classes (RobertaTokenizerFast...) carried it in their config: pass the file's
            pre = json.loads((Path(req["model"]) / "tokenizer.json").read_text()).get("pre_tokenizer") or {}
            extra = {"add_prefix_space": pre["add_prefix_space"]} if "add_prefix_space" in pre else {}
            tok = PreTrainedTokenizerFast.from_pretrained(req["model"], model_input_names=req["model_input_names"],
                                                          **extra)
        model = AutoModelForQuestionAnswering.from_pretrained(req["model"]).eval()
        qa = pipeline("question-answering", model=model, tokenizer=tok, framework="pt", device=-1)
        assert isinstance(qa, QA.QuestionAnsweringPipeline) and tok.is_fast
        results = []
        with torch.no_grad():
            for case in req["cases"]:
                windows.clear()
                got = qa(question=case["question"], context=case["context"], top_k=case["top_k"],
                         max_answer_len=case["max_answer_len"], max_seq_len=case["max_seq_len"],
                         doc_stride=case["doc_stride"], handle_impossible_answer=case["handle_impossible_answer"],
                         align_to_words=case.get("align_to_words", True))
                got = got if isinstance(got, list) else [got]
                enc = tok(case["question"], case["context"], truncation="only_second", max_length=case["max_seq_len"],
                          stride=case["doc_stride"], return_overflowing_tokens=True)
                results.append({
                    "answers": [{"answer": a["answer"], "start": int(a["start"]), "end": int(a["end"]),
                                 "score": float(np.float64(a["score"]))} for a in got],
                    "window_ids": [list(map(int, ids)) for ids in enc["input_ids"]],
                    "windows": [dict(w) for w in windows]})
        return {"transformers": transformers.__version__, "tokenizers": __import__("tokenizers").__version__,
                "results": results}

    print(json.dumps([answer(req) for req in json.load(sys.stdin)["requests"]]))


if __name__ == "__main__":
    _main()
