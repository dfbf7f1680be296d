"""Make a SYNTHETIC decoder yes/no reranker (random weights: the workflow is real, the scores are not) where
manifest.json expects it: examples/reranker_yes_no/models/yes-no-reranker-tiny, a seeded tiny Qwen3ForCausalLM
saved by transformers with a byte-level BPE tokenizer laid out as Qwen's (the BPE vocabulary, then
<|endoftext|> <|im_start|> <|im_end|> as special tokens), trained here on the parity corpus and Qwen3-Reranker's
template so that "yes" and "no" are single tokens, as they are for the real Qwen3-Reranker. Nothing is
downloaded. Its LM head is not tied to the input embeddings, so the exported graph visibly carries two rows of it.

    python examples/reranker_yes_no/prepare.py [--out DIR]
"""
from __future__ import annotations

import argparse
from pathlib import Path

HERE = Path(__file__).resolve().parent
SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
VOCAB = 480  # the BPE's own pieces, before the special tokens


def training_text() -> list[str]:
    """The parity corpus, the default template around a few pairs, and the answers as words of their own."""
    from readout_parity import corpus
    from readout_sdk.pair_template import PairTemplate

    template = PairTemplate()
    texts = list(corpus.TEXTS) + [x for p in corpus.PAIRS for x in p]
    return texts + [template.text(q, d) for q, d in corpus.PAIRS] + ["yes no"] * 50


def make_tokenizer():
    """A transformers Qwen2Tokenizer of a byte-level BPE trained on :func:`training_text`."""
    import json

    import transformers
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(training_text(), trainers.BpeTrainer(
        vocab_size=VOCAB, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    model = json.loads(tok.to_str())["model"]
    pieces = [t for t, _ in sorted(model["vocab"].items(), key=lambda kv: kv[1])]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    vocab = {t: i for i, t in enumerate([*pieces, *SPECIALS])}
    out = transformers.Qwen2Tokenizer(vocab=vocab, merges=merges, model_max_length=512, padding_side="left")
    out.add_special_tokens({"additional_special_tokens": list(SPECIALS[1:])})
    for word in ("yes", "no"):  # the graph reads one LM-head row per answer: each must be one token
        ids = out.encode(word, add_special_tokens=False)
        if len(ids) != 1:
            raise SystemExit(f"error: the trained tokenizer splits {word!r} into {len(ids)} tokens")
    return out


def make_model(out: Path, seed: int = 0) -> Path:
    """Save the tiny Qwen3ForCausalLM and its tokenizer under ``out``."""
    import torch
    import transformers

    tok = make_tokenizer()
    eot = tok.convert_tokens_to_ids("<|endoftext|>")
    # as the real Qwen3 config.json files: no pad_token_id; an untied LM head (Qwen3-Reranker-0.6B ties it)
    config = transformers.Qwen3Config(vocab_size=len(tok), hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                                      num_attention_heads=2, num_key_value_heads=1, head_dim=16,
                                      max_position_embeddings=512, initializer_range=0.1, tie_word_embeddings=False,
                                      bos_token_id=eot, eos_token_id=eot)
    torch.manual_seed(seed)
    model = transformers.Qwen3ForCausalLM(config).eval()
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE / "models" / "yes-no-reranker-tiny",
                        help="where to save the model (default: where manifest.json expects it)")
    args = parser.parse_args()
    from transformers.utils import logging as transformers_logging

    transformers_logging.set_verbosity_error()
    print(make_model(args.out))


if __name__ == "__main__":
    main()
