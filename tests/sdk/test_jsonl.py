"""`readout_sdk.jsonl`, the one JSONL reader, against the standard library's json (the oracle): the same
objects from the same lines, and each refusal naming the file and the line a person would look at."""
from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

from readout_sdk.jsonl import loads, objects


class Bad(Exception):
    """The caller's error type: the reader must raise this one, never its own."""


# JSON objects of every kind of value the reader must hand back unchanged (no NaN: strict JSON has none)
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
                      max_leaves=10)
rows = st.lists(st.dictionaries(st.text(), values, max_size=4), max_size=6)


@settings(max_examples=40, deadline=None)
@given(rows, st.sampled_from(["\n", "\r\n"]), st.booleans())
def test_objects_are_what_json_reads_line_by_line(tmp_path_factory, docs, newline, ensure_ascii):
    path = tmp_path_factory.mktemp("jsonl") / "rows.jsonl"
    lines = [json.dumps(d, ensure_ascii=ensure_ascii) for d in docs]
    path.write_bytes(newline.join(lines).encode("utf-8"))
    got = list(objects(path, Bad))
    assert [obj for _, obj in got] == [json.loads(line) for line in lines]
    assert [n for n, _ in got] == list(range(1, len(lines) + 1))


def test_blank_lines_are_skipped_and_numbering_counts_them(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('\n{"a": 1}\n   \n{"b": 2}\n\n')
    assert list(objects(path, Bad)) == [(2, {"a": 1}), (4, {"b": 2})]


def test_a_line_separator_inside_a_string_does_not_end_the_line(tmp_path):
    # str.splitlines() would cut these lines in two; JSONL lines end at "\n" only
    texts = ["before\u2028after", "x\u2029y", "form\x0cfeed", "next\x85line"]
    path = tmp_path / "rows.jsonl"
    path.write_bytes("\n".join(json.dumps({"text": t}, ensure_ascii=False) for t in texts).encode("utf-8"))
    assert [obj["text"] for _, obj in objects(path, Bad)] == texts


def test_raw_bytes_given_are_read_instead_of_the_file(tmp_path):
    path = tmp_path / "absent.jsonl"  # never opened
    assert list(objects(path, Bad, raw=b'{"a": 1}\n')) == [(1, {"a": 1})]


@pytest.mark.parametrize("line, words", [
    ("[1, 2]", "expected a JSON object, got list"),
    ('"text"', "expected a JSON object, got str"),
    ("3", "expected a JSON object, got int"),
    ('{"a": NaN}', "NaN"),
    ('{"a": Infinity}', "Infinity"),
    ('{"a": -Infinity}', "Infinity"),
    ('{"a": 1', "not valid JSON"),
    ("{'a': 1}", "not valid JSON"),
])
def test_a_bad_line_raises_the_callers_error_naming_file_and_line(tmp_path, line, words):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"ok": 1}\n\n' + line + '\n{"ok": 2}\n')
    with pytest.raises(Bad) as caught:
        list(objects(path, Bad))
    message = str(caught.value)
    assert message.startswith(f"{path}:3: ") and words in message


def test_not_utf8_names_the_byte_the_decoder_names(tmp_path):
    data = '{"text": "caf'.encode() + b"\xe9" + b'"}\n'
    path = tmp_path / "rows.jsonl"
    path.write_bytes(data)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        where = e.start  # the oracle: Python's own decoder
    with pytest.raises(Bad, match=rf"^{path}: not UTF-8 text \(byte {where}\)$"):
        list(objects(path, Bad))


def test_loads_refuses_deep_nesting_through_the_callers_error():
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(Bad, match="nested too deeply"):
        loads(deep, Bad)


def test_loads_reads_bytes_and_text_alike_and_reports_json_position():
    doc = {"a": [1, 2.5, None, "é"]}
    assert loads(json.dumps(doc).encode(), Bad) == loads(json.dumps(doc), Bad) == doc
    with pytest.raises(Bad, match=r"line 2 column 1"):
        loads('{"a": 1,\n}', Bad)
