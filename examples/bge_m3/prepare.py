"""SYNTHETIC: a tiny random BGE-M3 saved in BGE-M3's layout, for the multi-output example (no download).

BGE-M3 (BAAI/bge-m3) is an XLM-R encoder saved by transformers (config.json, model.safetensors, a Unigram
tokenizer with XLM-R's special ids: <s>=0 <pad>=1 </s>=2 <unk>=3 ... <mask> last) plus two head files next to
config.json: ``sparse_linear.pt`` (the state dict of ``nn.Linear(hidden, 1)``: the sparse term weights) and
``colbert_linear.pt`` (``nn.Linear(hidden, hidden)``: the multi-vector projection). This script saves the same
layout with random weights (2 layers, width 32) and a Unigram vocabulary trained here on a few sentences:

    python examples/bge_m3/prepare.py            # -> examples/bge_m3/models/bge-m3-tiny
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

MAX_LENGTH = 128
TEXTS = [
    "The quick brown fox jumps over the lazy dog.", "A cat sleeps on the warm windowsill all afternoon.",
    "Retrieval systems index documents so that queries find them quickly.", "Dense vectors compare texts by angle.",
    "Sparse vectors weigh the words a text contains.", "Multi-vector models keep one vector per token.",
    "Der schnelle braune Fuchs springt über den faulen Hund.", "Le renard brun rapide saute par-dessus le chien.",
    "El zorro marrón rápido salta sobre el perro perezoso.", "Il gatto dorme sul davanzale caldo.",
    "Search engines rank pages by relevance to a query.", "Transformers read every token of a sentence at once.",
    "How do I bake bread at home?", "Bread needs flour, water, salt and yeast.", "What is the capital of France?",
    "Paris is the capital and largest city of France.", "Rivers flow from mountains to the sea.",
    "The library opens at nine in the morning.", "Quantum computers use qubits instead of bits.",
    "A short text.", "Numbers like 42 and 3.14 appear in texts too.", "Emoji and accents: café, naïve, résumé.",
]


def unigram(size: int) -> list[tuple[str, float]]:
    """(piece, score) of a SentencePiece-style Unigram trained on TEXTS, without specials."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.Unigram())
    tok.normalizer = normalizers.NFKC()
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.train_from_iterator(TEXTS, trainers.UnigramTrainer(vocab_size=size, special_tokens=["<unk>"],
                                                           unk_token="<unk>", show_progress=False))
    return [(p, s) for p, s in json.loads(tok.to_str())["model"]["vocab"] if p != "<unk>"]


def prepare(out: Path, seed: int = 0) -> Path:
    """Save the tiny BGE-M3 into ``out`` (created); return ``out``."""
    import torch
    import transformers as t
    from torch import nn

    tok = t.XLMRobertaTokenizer(vocab=[("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0),
                                       *unigram(300), ("<mask>", 0.0)], model_max_length=MAX_LENGTH)
    config = t.XLMRobertaConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                intermediate_size=37, max_position_embeddings=MAX_LENGTH + 2, type_vocab_size=1,
                                pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id,
                                eos_token_id=tok.eos_token_id, initializer_range=0.1)
    torch.manual_seed(seed)
    model = t.XLMRobertaModel(config).eval()
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    # BGE-M3's heads, as its training code saves them: torch.save(module.state_dict(), path)
    torch.save(nn.Linear(config.hidden_size, 1).state_dict(), out / "sparse_linear.pt")
    torch.save(nn.Linear(config.hidden_size, config.hidden_size).state_dict(), out / "colbert_linear.pt")
    return out


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=here / "models" / "bge-m3-tiny")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(prepare(args.out, args.seed))
