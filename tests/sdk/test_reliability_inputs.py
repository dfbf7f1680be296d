"""Hostile SDK inputs found by the reliability probe (issue 15): each is refused with a documented error
that names the item and argument, or answered; nothing native escapes (SYNTHETIC models, REAL MiniLM)."""
from __future__ import annotations

import pytest

import readout_sdk
from readout_sdk.errors import InputRefused


@pytest.fixture(scope="module")
def tagger(shared):
    with readout_sdk.load(shared("tag-bert")[1]) as engine:
        yield engine


@pytest.fixture(scope="module")
def classifier(shared):
    with readout_sdk.load(shared("classify")[1]) as engine:
        yield engine


@pytest.fixture(scope="module")
def chooser(shared):
    with readout_sdk.load(shared("choice")[1]) as engine:
        yield engine


def test_a_question_that_fills_the_window_is_refused_not_a_rust_panic(shared_qa):
    # the probe's reproducer: tokenizers panics (pyo3 PanicException, a BaseException) on it
    with pytest.raises(InputRefused, match=r"item 0: the question is \d+ tokens.*at most \d+ tokens"):
        shared_qa.answer("who " * 200, "Ada Lovelace lived in London. " * 20)
    for words in range(30, 50):  # every length around the limit: an answer or the refusal, never a panic
        try:
            answer = shared_qa.answer("who " * words, "Ada Lovelace lived in London. " * 20)
        except InputRefused as e:
            assert "the question is" in str(e)
        else:
            assert answer.text == ("Ada Lovelace lived in London. " * 20)[answer.start:answer.end]


def test_a_long_question_beside_a_short_context_needs_no_window_and_is_answered(shared_qa):
    context = "Ada lived in London."
    answer = shared_qa.answer("where " * 30, context)
    assert context[answer.start:answer.end] == answer.text


def test_lone_surrogates_are_refused_naming_the_item_and_field(classifier, shared_qa, chooser):
    with pytest.raises(InputRefused, match=r"item 2: the text holds a lone surrogate .* at character 1"):
        classifier.classify(["fine", "also fine", "a\ud800b"])
    with pytest.raises(InputRefused, match=r"item 0: the context holds a lone surrogate"):
        shared_qa.answer("who?", "x \udfff y")
    with pytest.raises(InputRefused, match=r"the choice holds a lone surrogate"):
        chooser.choose("which?", ["one", "tw\ud83do"])


@pytest.mark.parametrize("top_k", [True, False, 0, -1, 1.5, "2", None])
def test_classify_top_k_must_be_a_positive_int(classifier, top_k):
    with pytest.raises((TypeError, ValueError), match="top_k must be a positive integer"):
        classifier.classify(["a text"], top_k=top_k)


@pytest.mark.parametrize("texts", [[], ["Ada lives in Paris."]])
def test_tag_refuses_an_unknown_aggregation_even_with_no_texts(tagger, texts):
    with pytest.raises(ValueError, match=r"aggregation must be one of .*'simple'.*did you mean 'simple'"):
        tagger.tag(texts, aggregation="simpel")
    with pytest.raises(ValueError, match="aggregation must be one of"):
        tagger.tag(texts, aggregation="bogus")


@pytest.mark.parametrize("bad", [{"a": 1}, {"a", "b"}, b"bytes", "one string", 7])
def test_texts_must_be_an_ordered_list_not_a_mapping_set_bytes_or_str(classifier, bad):
    with pytest.raises(TypeError, match="texts: expected"):
        classifier.classify(bad)


@pytest.mark.parametrize("kwargs", [{"top_k": True}, {"max_answer_length": 0}, {"max_answer_length": True},
                                    {"align_to_words": "no"}])
def test_answer_options_are_type_checked(shared_qa, kwargs):
    with pytest.raises((TypeError, ValueError), match=next(iter(kwargs))):
        shared_qa.answer("who?", "Ada lived in London.", **kwargs)


@pytest.mark.parametrize("kwargs", [{"batch_size": True}, {"batch_size": 0}])
def test_batch_size_is_a_positive_int(classifier, kwargs):
    with pytest.raises((TypeError, ValueError), match="batch_size must be a positive integer"):
        classifier.classify(["x"], **kwargs)


def test_choices_must_be_a_list_of_strings(chooser):
    with pytest.raises(TypeError, match="choices: expected"):
        chooser.choose("which?", {"a": 1, "b": 2})
    with pytest.raises(TypeError, match="item 1: the choice must be str"):
        chooser.choose("which?", ["one", 2])
    with pytest.raises(InputRefused, match="at least one choice"):
        chooser.choose("which?", [])


@pytest.mark.parametrize("kwargs, words", [({"device": "gpu"}, "device must be one of"),
                                           ({"precision": "fp64"}, "precision must be one of"),
                                           ({"backend": "onnxrutime"}, "did you mean 'onnxruntime'"),
                                           ({"streams": 0}, "streams must be a positive integer"),
                                           ({"threads": True}, "threads must be a positive integer"),
                                           ({"target": 3}, "target must be a target name")])
def test_load_arguments_are_checked_before_anything_loads(shared, kwargs, words):
    with pytest.raises((TypeError, ValueError), match=words):
        readout_sdk.load(shared("classify")[1], **kwargs)


def test_a_load_nothing_can_run_says_so_without_a_double_negative(shared):
    from readout_sdk.errors import DeviceUnavailable

    with pytest.raises(DeviceUnavailable, match="none of this artifact's targets can run on backend 'tensorrt'"):
        readout_sdk.load(shared("classify")[1], backend="tensorrt")
