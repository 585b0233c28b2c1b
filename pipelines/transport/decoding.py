"""Decoding an answer's body: JSON, or a model validated from the bytes, with a body that is
not whole JSON (a cut answer, `TruncatedBody`) told apart, since only that one is worth asking
again (`pipelines/transport/retries.py`).

Text UTF-8 cannot carry is read as U+FFFD, so Arrow and Parquet take every answer: a lone
surrogate (`"\\ud800"`, valid JSON, which services with UTF-16 strings send) and a byte that
is not UTF-8 (`readable_json`). Only a body the decoder refused is looked at for them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pydantic
import pydantic_core

from pipelines.errors import Retriable


class TruncatedBody(Retriable):
    """The body ended before the document did (cut connection, short read)."""


def any_json(content: bytes) -> Any:
    # Not `json.loads`: like the other decoders it refuses a lone surrogate rather than
    # return a `str` UTF-8 cannot encode, so `decode_readable` handles it for all of them.
    try:
        return pydantic_core.from_json(content)
    except ValueError:
        raise TruncatedBody("the body is not whole JSON") from None


#: JSON escapes of UTF-16 surrogates. Kept: a high and a low one that make a pair, and an
#: escaped backslash (so that `\\ud800`, a backslash then "ud800", is not read as one).
#: The others are lone surrogates.
_SURROGATE_ESCAPES = re.compile(
    rb"(?P<kept>\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
)


def readable_json(content: bytes) -> bytes:
    """`content` with each lone surrogate escape and each byte sequence that is not UTF-8
    as U+FFFD (the same object when it holds neither)."""
    try:
        content.decode("utf-8")
    except UnicodeDecodeError:
        content = content.decode("utf-8", "replace").encode("utf-8")
    if b"\\u" not in content:
        return content
    readable = _SURROGATE_ESCAPES.sub(lambda m: m["kept"] or rb"\ufffd", content)
    return content if readable == content else readable


def decode_readable(decode: Callable[[bytes], Any], content: bytes) -> Any:
    """`decode(content)`; a body it refuses as not whole JSON is decoded again with the text
    UTF-8 cannot carry as U+FFFD, if it holds any (`readable_json`)."""
    try:
        return decode(content)
    except TruncatedBody:
        readable = readable_json(content)
        if readable is content:
            raise
    return decode(readable)


def whole_json(validate: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    """`validate`, with a body that is not whole JSON (a cut answer) told apart from one
    that is whole but does not fit the model: only the first is worth asking again."""

    def decode(content: bytes) -> Any:
        try:
            return validate(content)
        except pydantic.ValidationError as exc:
            if any(error["type"] == "json_invalid" for error in exc.errors()):
                raise TruncatedBody("the body is not whole JSON") from None
            raise

    return decode
