"""The architecture matrix (issue 45, point 3): tiny models of the architectures people ship, built at test
time, each with the tokenizer class and special-token layout its public checkpoints ship, saved the way users
save them. Every model here is SYNTHETIC: random seeded weights, vocabularies trained in-process on the fixed
corpus in milliseconds (BERT's WordPiece is MiniLM's real vocabulary); nothing is downloaded.

``MATRIX`` is the data both tests/exporter/test_architectures.py and docs/generate.py (docs/architectures.md)
read: one ``Cell`` per architecture x family. ``MEASURED`` (architectures.json beside this file) holds what the
last full run (``READOUT_ARCHITECTURES_JSON=tests/helpers/architectures.json pytest -m architectures``)
measured per cell. Heavy imports (torch, transformers, sentence-transformers) happen inside the builders only,
so the generator can read the matrix cheaply.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from helpers.corpus import CHOICES, PAIRS, TEXTS

ENCODERS = ("bert", "roberta", "xlm-roberta", "distilbert", "deberta-v2", "electra", "mpnet", "modernbert",
            "albert", "camembert")
DECODERS = ("qwen2", "qwen3", "mistral", "gemma3_text")
FAMILIES = ("embedding", "sequence_classification", "token_classification", "extractive_qa")
SENTIMENT = ["negative", "neutral", "positive"]
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
MAX_LENGTH = 128
# ModernBERT's local attention window (tokens in all, half each side), far shorter than the corpora's long
# texts (128 tokens after truncation): a graph that ignored the window would attend globally and differ.
MODERNBERT_WINDOW = 16
# Gemma 3's sliding window (as EmbeddingGemma states it: bidirectional, so transformers keeps (w // 2) + 1)
GEMMA_WINDOW = 16

# the tokenizer kind and the class each architecture's public checkpoints ship
TOKENIZERS = {
    "bert": ("WordPiece (MiniLM's vocabulary)", "BertTokenizer"),
    "distilbert": ("WordPiece (MiniLM's vocabulary)", "DistilBertTokenizer"),
    "electra": ("WordPiece (MiniLM's vocabulary)", "ElectraTokenizer"),
    "mpnet": ("WordPiece with `<s>`/`</s>`", "MPNetTokenizer"),
    "roberta": ("byte-level BPE", "RobertaTokenizer"),
    "modernbert": ("byte-level BPE with `[CLS]`/`[SEP]`", "PreTrainedTokenizerFast"),
    "qwen2": ("byte-level BPE", "Qwen2Tokenizer"),
    "qwen3": ("byte-level BPE", "Qwen2Tokenizer"),
    "xlm-roberta": ("Unigram", "XLMRobertaTokenizer"),
    "camembert": ("Unigram (`<s>`=5, `</s>`=6)", "CamembertTokenizer"),
    "deberta-v2": ("Unigram with `[CLS]`/`[SEP]`", "DebertaV2Tokenizer"),
    "albert": ("Unigram with `[CLS]`/`[SEP]`, lowercased", "AlbertTokenizer"),
    "mistral": ("SentencePiece BPE, byte fallback", "LlamaTokenizer"),
    "gemma3_text": ("SentencePiece BPE, byte fallback", "GemmaTokenizer"),
}

# sentence-transformers layout of each architecture's embedding model, after a public checkpoint of its kind
ST_LAYOUT = {
    "bert": (["mean"], None, True),          # all-MiniLM-L6-v2
    "roberta": (["mean"], None, False),      # all-distilroberta-v1 without its Normalize
    "xlm-roberta": (["cls"], None, True),    # BGE-M3's dense vector
    "distilbert": (["cls"], None, False),    # msmarco-distilbert-*-tas-b
    "deberta-v2": (["mean"], None, False),
    "electra": (["mean"], None, False),
    "mpnet": (["mean"], None, True),         # all-mpnet-base-v2
    "modernbert": (["mean"], None, True),    # modernbert-embed-base
    "albert": (["mean"], None, False),       # paraphrase-albert-small-v2
    "camembert": (["mean"], None, False),    # sentence-camembert-base
    "qwen2": (["lasttoken"], None, True),    # gte-Qwen2-*-instruct
    "qwen3": (["lasttoken"], None, True),    # Qwen3-Embedding
    "mistral": (["lasttoken"], None, True),  # e5-mistral-7b-instruct
    "gemma3_text": (["mean"], (64, 32), True),  # EmbeddingGemma: mean, Dense up, Dense down, Normalize
}


@dataclass(frozen=True)
class Cell:
    """One architecture x family of the matrix."""

    arch: str
    family: str

    @property
    def id(self) -> str:
        return f"{self.arch}-{self.family}"

    @property
    def saved_by(self) -> str:
        return "sentence-transformers 6" if self.family == "embedding" else "transformers"

    @property
    def tokenizer(self) -> str:
        return TOKENIZERS[self.arch][0]

    @property
    def kind(self) -> str:
        return "decoder" if self.arch in DECODERS else "encoder"


def _has_head(arch: str, family: str) -> bool:
    from transformers.models.auto import modeling_auto as m

    names = {"embedding": m.MODEL_MAPPING_NAMES,
             "sequence_classification": m.MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES,
             "token_classification": m.MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES,
             "extractive_qa": m.MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES}[family]
    return arch in names


def matrix() -> list[Cell]:
    """Every architecture x (embedding, sequence classification, and token classification and extractive QA
    where transformers has the head)."""
    return [Cell(a, f) for a in (*ENCODERS, *DECODERS) for f in FAMILIES if _has_head(a, f)]


# the default run's representative slice: one sentence-transformers-saved encoder embedding (Unigram
# tokenizer, CLS pooling), one decoder classifier, and ModernBERT with a local window shorter than the texts
SLICE = (Cell("xlm-roberta", "embedding"), Cell("qwen2", "sequence_classification"),
         Cell("modernbert", "embedding"))

# cells where the SDK differs from eager for a known reason outside the matrix's own files (the test marks them
# xfail, strict; docs/architectures.md shows the reason)
KNOWN: dict[str, str] = {}  # cell -> why it is expected to fail (a strict xfail: fixing it says so)

RESULTS = Path(__file__).with_name("architectures.json")


def measured() -> dict[str, dict]:
    """What the last full run measured per cell id (empty before one was recorded)."""
    return json.loads(RESULTS.read_text()) if RESULTS.is_file() else {}


# ---- tokenizers ------------------------------------------------------------------------------------------

def _training_text() -> list[str]:
    from readout_parity import corpus as parity

    out = list(TEXTS) + [x for p in PAIRS for x in p] + [q for q, _ in CHOICES] + [c for _, cs in CHOICES for c in cs]
    return out + list(parity.TEXTS) + [x for p in parity.PAIRS for x in p]


def _trained(model, pre_tokenizer, trainer, normalizer=None) -> dict:
    """Train a tokenizers model on the corpus; return its model JSON (vocab, merges)."""
    from tokenizers import Tokenizer

    tok = Tokenizer(model)
    if normalizer is not None:
        tok.normalizer = normalizer
    if pre_tokenizer is not None:
        tok.pre_tokenizer = pre_tokenizer
    tok.train_from_iterator(_training_text(), trainer)
    return json.loads(tok.to_str())["model"]


def _merges(model_json: dict) -> list[tuple[str, str]]:
    return [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model_json["merges"]]


def _byte_bpe(size: int) -> tuple[list[str], list[tuple[str, str]]]:
    """(tokens in id order, merges) of a byte-level BPE, no specials."""
    from tokenizers import models, pre_tokenizers, trainers

    trained = _trained(models.BPE(), pre_tokenizers.ByteLevel(add_prefix_space=False),
                       trainers.BpeTrainer(vocab_size=size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                           show_progress=False))
    vocab = sorted(trained["vocab"].items(), key=lambda kv: kv[1])
    return [t for t, _ in vocab], _merges(trained)


def _unigram(size: int, lowercase: bool = False) -> list[tuple[str, float]]:
    """(piece, score) of a SentencePiece-style Unigram, no specials (its unk piece dropped)."""
    from tokenizers import models, normalizers, pre_tokenizers, trainers

    norm = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()]) if lowercase else normalizers.NFKC()
    trained = _trained(models.Unigram(), pre_tokenizers.Metaspace(), trainers.UnigramTrainer(
        vocab_size=size, special_tokens=["<unk>"], unk_token="<unk>", show_progress=False), norm)
    return [(p, s) for p, s in trained["vocab"] if p != "<unk>"]


def _sentencepiece_bpe(size: int) -> tuple[list[str], list[tuple[str, str]]]:
    """(tokens, merges) of a SentencePiece-style BPE (``▁`` for spaces) without specials or byte tokens."""
    from tokenizers import models, pre_tokenizers, trainers

    trained = _trained(models.BPE(), pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first"),
                       trainers.BpeTrainer(vocab_size=size, show_progress=False))
    vocab = sorted(trained["vocab"].items(), key=lambda kv: kv[1])
    return [t for t, _ in vocab], _merges(trained)


BYTES = [f"<0x{b:02X}>" for b in range(256)]


def _ids(tokens: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in tokens:
        out.setdefault(t, len(out))
    return out


def make_tokenizer(arch: str, family: str = "embedding"):
    """A transformers tokenizer of the class ``arch``'s public checkpoints ship, special tokens at their ids.
    Decoder embedding tokenizers append the end token and pad on the left (Qwen3-Embedding, gte-Qwen2,
    e5-mistral, EmbeddingGemma); decoder head tokenizers are their base models' (no end token)."""
    import transformers as t
    from tokenizers import Tokenizer, processors

    from helpers import synthetic

    embedding = family == "embedding"
    kw = dict(model_max_length=MAX_LENGTH)
    if arch in ("bert", "distilbert", "electra"):  # bert-base-uncased's vocabulary: [PAD]=0, [UNK]=100, [CLS]=101
        vocab = (synthetic.minilm_path() / "vocab.txt").read_text(encoding="utf-8").splitlines()
        cls = {"bert": t.BertTokenizer, "distilbert": t.DistilBertTokenizer, "electra": t.ElectraTokenizer}[arch]
        return cls(vocab=_ids(vocab), **kw)
    if arch == "mpnet":  # <s>=0 <pad>=1 </s>=2 ... <mask> last; unk [UNK]
        from tokenizers import models, normalizers, pre_tokenizers, trainers

        trained = _trained(models.WordPiece(unk_token="[UNK]"), pre_tokenizers.BertPreTokenizer(),
                           trainers.WordPieceTrainer(vocab_size=500, special_tokens=["[UNK]"], show_progress=False),
                           normalizers.BertNormalizer(lowercase=True))
        pieces = [p for p, _ in sorted(trained["vocab"].items(), key=lambda kv: kv[1]) if p != "[UNK]"]
        return t.MPNetTokenizer(vocab=_ids(["<s>", "<pad>", "</s>", "<unk>", "[UNK]", *pieces, "<mask>"]), **kw)
    if arch == "roberta":  # <s>=0 <pad>=1 </s>=2 <unk>=3 ... <mask> last
        pieces, merges = _byte_bpe(500)
        return t.RobertaTokenizer(vocab=_ids(["<s>", "<pad>", "</s>", "<unk>", *pieces, "<mask>"]), merges=merges, **kw)
    if arch == "modernbert":  # OLMo's BPE; <|endoftext|> then [UNK] [CLS] [SEP] [PAD] [MASK] after the vocabulary
        pieces, merges = _byte_bpe(500)
        specials = ["<|endoftext|>", "[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]
        from tokenizers import decoders, models, pre_tokenizers

        ids = _ids([*pieces, *specials])
        tok = Tokenizer(models.BPE(vocab=ids, merges=merges))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tok.add_special_tokens(specials)
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
            special_tokens=[("[CLS]", ids["[CLS]"]), ("[SEP]", ids["[SEP]"])])
        return t.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
                                         pad_token="[PAD]", mask_token="[MASK]", bos_token=None, eos_token=None,
                                         model_input_names=["input_ids", "attention_mask"], **kw)
    if arch in ("qwen2", "qwen3"):  # the BPE vocabulary, then <|endoftext|> <|im_start|> <|im_end|>
        pieces, merges = _byte_bpe(500)
        tok = t.Qwen2Tokenizer(vocab=_ids([*pieces, "<|endoftext|>", "<|im_start|>", "<|im_end|>"]), merges=merges,
                               padding_side="left" if embedding else "right", **kw)
        if embedding:  # Qwen3-Embedding / gte-Qwen2 tokenizers append <|endoftext|>, the pooled last token
            eot = tok.convert_tokens_to_ids("<|endoftext|>")
            tok.backend_tokenizer.post_processor = processors.TemplateProcessing(
                single="$A:0 <|endoftext|>:0", pair="$A:0 <|endoftext|>:0 $B:1 <|endoftext|>:1",
                special_tokens=[("<|endoftext|>", eot)])
        return tok
    if arch in ("xlm-roberta", "camembert", "deberta-v2", "albert"):
        pieces = _unigram(400, lowercase=arch == "albert")
        if arch == "xlm-roberta":  # <s>=0 <pad>=1 </s>=2 <unk>=3 ... <mask> last
            return t.XLMRobertaTokenizer(vocab=[("<s>", 0.0), ("<pad>", 0.0), ("</s>", 0.0), ("<unk>", 0.0),
                                                *pieces, ("<mask>", 0.0)], **kw)
        if arch == "camembert":  # fairseq's layout: <s>NOTUSED=0 <pad>=1 </s>NOTUSED=2 <unk>=3 ... <s>=5 </s>=6
            return t.CamembertTokenizer(vocab=[("<s>NOTUSED", 0.0), ("<pad>", 0.0), ("</s>NOTUSED", 0.0),
                                               ("<unk>", 0.0), ("<unk>NOTUSED", -100.0), ("<s>", 0.0), ("</s>", 0.0),
                                               *pieces, ("<mask>", 0.0)], **kw)
        if arch == "deberta-v2":  # DeBERTa-v3: [PAD]=0 [CLS]=1 [SEP]=2 [UNK]=3 ... [MASK] last
            return t.DebertaV2Tokenizer(vocab=[("[PAD]", 0.0), ("[CLS]", 0.0), ("[SEP]", 0.0), ("[UNK]", 0.0),
                                               *pieces, ("[MASK]", 0.0)], **kw)
        return t.AlbertTokenizer(vocab=[("<pad>", 0.0), ("<unk>", 0.0), ("[CLS]", 0.0), ("[SEP]", 0.0),
                                        ("[MASK]", 0.0), *pieces], **kw)  # albert-base-v2
    if arch == "mistral":  # <unk>=0 <s>=1 </s>=2, byte tokens, then the vocabulary
        pieces, merges = _sentencepiece_bpe(500)
        tok = t.LlamaTokenizer(vocab=_ids(["<unk>", "<s>", "</s>", *BYTES, *pieces]), merges=merges,
                               add_bos_token=True, add_eos_token=embedding, **kw)
        tok.pad_token = "</s>" if embedding else "<unk>"  # e5-mistral pads with </s>; fine-tuners often <unk>
        tok.padding_side = "left" if embedding else "right"
        return tok
    if arch == "gemma3_text":  # <pad>=0 <eos>=1 <bos>=2 <unk>=3 <mask>=4, byte tokens, then the vocabulary
        pieces, merges = _sentencepiece_bpe(500)
        return t.GemmaTokenizer(vocab=_ids(["<pad>", "<eos>", "<bos>", "<unk>", "<mask>", *BYTES, *pieces]),
                                merges=merges, add_bos_token=True, add_eos_token=embedding, **kw)
    raise ValueError(arch)


# ---- configs and models ----------------------------------------------------------------------------------

TINY = dict(num_hidden_layers=2, num_attention_heads=2, intermediate_size=37, initializer_range=0.1)


def make_config(arch: str, tok, family: str, **extra):
    """A tiny ``arch`` config whose special ids are the tokenizer's."""
    import transformers as t

    vocab = len(tok)
    if arch in ("bert", "electra"):
        cls = t.BertConfig if arch == "bert" else t.ElectraConfig
        more = dict(embedding_size=16) if arch == "electra" else {}  # ELECTRA-small factorizes its embeddings too
        return cls(vocab_size=vocab, hidden_size=32, max_position_embeddings=MAX_LENGTH, pad_token_id=0, **TINY,
                   **more, **extra)
    if arch == "distilbert":
        return t.DistilBertConfig(vocab_size=vocab, dim=32, n_layers=2, n_heads=2, hidden_dim=37, pad_token_id=0,
                                  max_position_embeddings=MAX_LENGTH, initializer_range=0.1, **extra)
    if arch in ("roberta", "xlm-roberta", "camembert"):  # positions offset by pad id + 1
        cls = {"roberta": t.RobertaConfig, "xlm-roberta": t.XLMRobertaConfig, "camembert": t.CamembertConfig}[arch]
        return cls(vocab_size=vocab, hidden_size=32, max_position_embeddings=MAX_LENGTH + 2, type_vocab_size=1,
                   pad_token_id=tok.pad_token_id, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                   **TINY, **extra)
    if arch == "mpnet":
        return t.MPNetConfig(vocab_size=vocab, hidden_size=32, max_position_embeddings=MAX_LENGTH + 2, pad_token_id=1,
                             bos_token_id=0, eos_token_id=2, **TINY, **extra)
    if arch == "deberta-v2":  # DeBERTa-v3's attention: relative positions, no absolute ones, no token types
        return t.DebertaV2Config(vocab_size=vocab, hidden_size=32, max_position_embeddings=MAX_LENGTH, pad_token_id=0,
                                 relative_attention=True, position_buckets=32, pos_att_type=["p2c", "c2p"],
                                 position_biased_input=False, type_vocab_size=0, norm_rel_ebd="layer_norm",
                                 share_att_key=True, max_relative_positions=-1, **TINY, **extra)
    if arch == "albert":
        return t.AlbertConfig(vocab_size=vocab, embedding_size=16, hidden_size=32, max_position_embeddings=MAX_LENGTH,
                              pad_token_id=0, bos_token_id=2, eos_token_id=3, **TINY, **extra)
    if arch == "modernbert":  # layer 0 global, layers 1 and 2 local (window MODERNBERT_WINDOW)
        ids = tok.convert_tokens_to_ids
        return t.ModernBertConfig(vocab_size=vocab, hidden_size=32, intermediate_size=40, num_hidden_layers=3,
                                  num_attention_heads=2, max_position_embeddings=MAX_LENGTH,
                                  global_attn_every_n_layers=3, local_attention=MODERNBERT_WINDOW,
                                  pad_token_id=ids("[PAD]"), cls_token_id=ids("[CLS]"), sep_token_id=ids("[SEP]"),
                                  bos_token_id=ids("[CLS]"), eos_token_id=ids("[SEP]"), initializer_range=0.1,
                                  **extra)
    decoder = dict(vocab_size=vocab, hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=2,
                   num_key_value_heads=1, max_position_embeddings=256, initializer_range=0.1, tie_word_embeddings=False)
    # a fine-tuned decoder head states the pad id it was trained with (transformers needs one to batch)
    pad = dict(pad_token_id=tok.pad_token_id) if family != "embedding" else {}
    if arch in ("qwen2", "qwen3"):
        eot = tok.convert_tokens_to_ids("<|endoftext|>")
        cls = t.Qwen2Config if arch == "qwen2" else t.Qwen3Config
        more = dict(head_dim=16) if arch == "qwen3" else {}
        return cls(**decoder, bos_token_id=eot, eos_token_id=eot, **more, **pad, **extra)
    if arch == "mistral":
        return t.MistralConfig(**decoder, head_dim=16, bos_token_id=1, eos_token_id=2, sliding_window=None, **pad,
                               **extra)
    if arch == "gemma3_text":  # EmbeddingGemma's attention: bidirectional, sliding and full layers
        return t.Gemma3TextConfig(**{**decoder, "tie_word_embeddings": True}, head_dim=16, pad_token_id=0,
                                  bos_token_id=2, eos_token_id=1, use_bidirectional_attention=True,
                                  sliding_window=GEMMA_WINDOW, layer_types=["sliding_attention", "full_attention"],
                                  query_pre_attn_scalar=16, **extra)
    raise ValueError(arch)


AUTO = {"embedding": "AutoModel", "sequence_classification": "AutoModelForSequenceClassification",
        "token_classification": "AutoModelForTokenClassification", "extractive_qa": "AutoModelForQuestionAnswering"}


def make_model(arch: str, family: str, out: Path, seed: int = 0) -> Path:
    """SYNTHETIC: a seeded tiny ``arch`` with the ``family``'s transformers head, saved by transformers
    (``save_pretrained``) with its tokenizer, as a user saves a fine-tuned checkpoint."""
    import torch
    import transformers

    tok = make_tokenizer(arch, family)
    labels = {"sequence_classification": SENTIMENT, "token_classification": TAGS}.get(family)
    extra = dict(id2label=dict(enumerate(labels)), label2id={v: k for k, v in enumerate(labels)}) if labels else {}
    config = make_config(arch, tok, family, **extra)
    torch.manual_seed(seed)
    model = getattr(transformers, AUTO[family]).from_config(config).eval()
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    return out


def make_st_model(arch: str, out: Path, seed: int = 0) -> Path:
    """SYNTHETIC: a seeded tiny ``arch`` embedding model in the sentence-transformers layout its public
    embedding checkpoints use (``ST_LAYOUT``: Transformer, Pooling, [Dense...], [Normalize]), saved by
    sentence-transformers 6 as users save one (``SentenceTransformer(modules=...).save``, which writes
    ``"prompts": {"query": "", "document": ""}``)."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer import modules as M

    backbone = make_model(arch, "embedding", out.parent / f"{out.name}-backbone", seed=seed)
    pooling, dense, normalize = ST_LAYOUT[arch]
    transformer = M.Transformer(str(backbone), max_seq_length=MAX_LENGTH)
    width = transformer.get_embedding_dimension()
    modules = [transformer, M.Pooling(width, pooling_mode=pooling)]
    torch.manual_seed(seed + 1)
    for features in dense or ():  # EmbeddingGemma's projections: bias-free, identity activation
        modules.append(M.Dense(width, features, bias=False, activation_function=torch.nn.Identity()))
        width = features
    if normalize:
        modules.append(M.Normalize())
    SentenceTransformer(modules=modules, device="cpu").save(str(out))
    return out


def make(cell: Cell, out: Path) -> Path:
    """The model directory of ``cell`` (SYNTHETIC)."""
    if cell.family == "embedding":
        return make_st_model(cell.arch, out)
    return make_model(cell.arch, cell.family, out)


# ---- what the anchors state (docs/architectures.md) ------------------------------------------------------
# Only what each project's own documentation or model list states, read for issue 45; "not stated" otherwise.
ANCHOR_SOURCES = {
    "vLLM": "https://docs.vllm.ai/en/latest/models/pooling_models/ (embed, classify, scoring, token_classify "
            "pages: their supported-model tables)",
    "FastEmbed": "https://qdrant.github.io/fastembed/examples/Supported_Models/ (a list of checkpoints, not of "
                 "architectures; embeddings, sparse, late interaction and cross-encoder reranking only)",
    "OpenVINO": "https://huggingface.co/docs/optimum/intel/openvino/models (optimum-intel's export "
                "architectures; which head per architecture is not stated)",
    "TEI": "https://huggingface.co/docs/text-embeddings-inference/supported_models (embedding architectures; "
           "re-rankers and sequence classification)",
}
NOT_STATED = "not stated"
ANCHORS = {
    "bert": {"vLLM": "embed (`BertModel`), score (`BertForSequenceClassification`), token classify "
                     "(`BertForTokenClassification`)",
             "FastEmbed": "checkpoints listed (all-MiniLM-L6-v2, bge-*-en-v1.5)", "OpenVINO": "listed",
             "TEI": "embed"},
    "roberta": {"vLLM": "embed (`RobertaModel`), score (`RobertaForSequenceClassification`)",
                "FastEmbed": NOT_STATED, "OpenVINO": "listed",
                "TEI": "a RoBERTa classifier among the sequence-classification examples"},
    "xlm-roberta": {"vLLM": "embed (`XLMRobertaModel`), score (`XLMRobertaForSequenceClassification`)",
                    "FastEmbed": "checkpoints listed (multilingual-e5-large, paraphrase-multilingual-mpnet-base-v2)",
                    "OpenVINO": "listed", "TEI": "embed, sequence classification"},
    "distilbert": {"vLLM": NOT_STATED, "FastEmbed": NOT_STATED, "OpenVINO": "listed", "TEI": NOT_STATED},
    "deberta-v2": {"vLLM": NOT_STATED, "FastEmbed": NOT_STATED, "OpenVINO": "listed", "TEI": NOT_STATED},
    "electra": {"vLLM": NOT_STATED, "FastEmbed": NOT_STATED, "OpenVINO": "listed", "TEI": NOT_STATED},
    "mpnet": {"vLLM": NOT_STATED, "FastEmbed": NOT_STATED, "OpenVINO": "listed", "TEI": "embed"},
    "modernbert": {"vLLM": "embed (`ModernBertModel`), token classify (`ModernBertForTokenClassification`)",
                   "FastEmbed": NOT_STATED, "OpenVINO": "not listed", "TEI": "embed"},
    "albert": {"vLLM": NOT_STATED, "FastEmbed": NOT_STATED, "OpenVINO": "listed", "TEI": NOT_STATED},
    "camembert": {"vLLM": NOT_STATED, "FastEmbed": NOT_STATED, "OpenVINO": "listed",
                  "TEI": "embed, sequence classification"},
    "qwen2": {"vLLM": "embed (`Qwen2Model`), classify (`Qwen2ForSequenceClassification`)", "FastEmbed": NOT_STATED,
              "OpenVINO": "listed", "TEI": "embed"},
    "qwen3": {"vLLM": "embed (`Qwen3Model`), score (`Qwen3ForSequenceClassification`), token classify "
                      "(`Qwen3ForTokenClassification`)",
              "FastEmbed": "Qwen3-Embedding-0.6B (fastembed/text/qwen3_embedding.py)", "OpenVINO": "listed",
              "TEI": "embed (a Qwen3 classifier is an open pull request, #698 / #835)"},
    "mistral": {"vLLM": "embed (`MistralModel`); heads only by converting a generative model", "FastEmbed": NOT_STATED,
                "OpenVINO": "listed", "TEI": "embed"},
    "gemma3_text": {"vLLM": "embed (`Gemma3TextModel`, EmbeddingGemma); heads only by converting a generative model",
                    "FastEmbed": "google/embeddinggemma-300m", "OpenVINO": "listed", "TEI": "embed"},
}
