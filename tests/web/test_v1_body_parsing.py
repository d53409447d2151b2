"""``load_body`` reads a request body with orjson and falls back to the standard parser:
every body gives the data the standard parser gives, or the same 400."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hermes_web.openai_compat.errors import ApiError
from hermes_web.openai_compat.validation import load_body

values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)  # past 64 bits: orjson refuses those
    | st.floats(allow_nan=False)
    | st.text(),  # lone surrogates included
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(), values, max_size=5), st.booleans())
def test_a_body_reads_as_the_standard_parser_reads_it(data, ascii_only):
    body = json.dumps(data, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    try:
        expected = json.loads(body)
    except ValueError:  # a raw lone surrogate is not UTF-8: both refuse it
        with pytest.raises(ApiError):
            load_body(body)
        return
    assert load_body(body) == expected


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"", "Expecting value"),
        (b'{"model": ', "Expecting value"),
        (b"[1, 2]", "must be a JSON object"),
        (b"[" * 100_000, "nested too deeply"),
    ],
)
def test_a_body_that_is_not_a_json_object_is_a_400_worded_as_before(body, reason):
    with pytest.raises(ApiError) as raised:
        load_body(body)
    assert raised.value.status == 400
    assert reason in raised.value.message


def test_what_only_the_standard_parser_reads_is_still_read():
    assert load_body(b'{"n": NaN, "big": 123456789012345678901234567890}')["big"] == (
        123456789012345678901234567890
    )
    assert load_body(json.dumps({"a": "\ud800"}).encode()) == {"a": "\ud800"}
    assert load_body(json.dumps({"a": "é"}).encode("utf-16")) == {"a": "é"}
