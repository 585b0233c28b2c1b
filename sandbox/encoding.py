"""Text in and out, as a service whose strings are UTF-16 (JavaScript, Java, C#) keeps it.

Such a service takes a JSON string holding a lone surrogate (`"\\ud800"`, valid JSON) and
keeps it; Python decodes it to a `str` that UTF-8 cannot encode. The sandbox takes it too,
and serves it back as such a service does:

- taken in any string field: a bounded one (`Text`, `bounded_text`) checks its bounds on a
  stand-in, since pydantic cannot measure such a string (an unbounded `str` takes it as
  is; one with a pattern refuses it, as any text that does not fit);
- in JSON (`JSONResponse`, `json_bytes`) as the escape `\\ud800`, as `JSON.stringify` writes
  it;
- in CSV files (`csv_bytes`), which are UTF-8 and cannot carry it, as U+FFFD.

Every answer, file and webhook body the sandbox writes goes through here. The common path
is the plain encoder: the error handlers below are called only for a character UTF-8
cannot encode, and the stand-in only after validation failed.
"""

from __future__ import annotations

import codecs
import json
import re
from typing import Annotated, Any

from fastapi.responses import JSONResponse as _StarletteJSONResponse
from pydantic import Field, ValidationError, ValidatorFunctionWrapHandler, WrapValidator

LONE_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT_CHARACTER = "\ufffd"
#: The codec error handler `csv_bytes` uses: each character UTF-8 cannot encode as U+FFFD.
_AS_REPLACEMENT_CHARACTER = "sandbox.replacement_character"


def _as_replacement_character(error: UnicodeError) -> tuple[bytes, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    # Bytes: the UTF-8 encoder takes only ASCII text back from an error handler.
    return REPLACEMENT_CHARACTER.encode() * (error.end - error.start), error.end


codecs.register_error(_AS_REPLACEMENT_CHARACTER, _as_replacement_character)


def _take_lone_surrogates(value: Any, validate: ValidatorFunctionWrapHandler) -> Any:
    try:
        return validate(value)
    except ValidationError:
        if not (isinstance(value, str) and LONE_SURROGATE.search(value)):
            raise
    # The field's rules (bounds) on a stand-in of the same length; the text itself is kept.
    validate(LONE_SURROGATE.sub(REPLACEMENT_CHARACTER, value))
    return value


TAKES_LONE_SURROGATES = WrapValidator(_take_lone_surrogates)
#: A string field whose bounds are given by `Field(...)` on the field itself.
Text = Annotated[str, TAKES_LONE_SURROGATES]


def bounded_text(**bounds: Any) -> Any:
    """`str` with `Field` bounds (`min_length`, `max_length`) that takes lone surrogates;
    for where `Text = Field(...)` does not fit (inside `X | None`, list items)."""
    return Annotated[str, Field(**bounds), TAKES_LONE_SURROGATES]


def json_bytes(content: Any) -> bytes:
    """`content` as compact UTF-8 JSON (Starlette's form)."""
    text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    # A lone surrogate is the only character UTF-8 cannot encode, and in JSON text it can only
    # stand inside a string, where Python's `\udXXX` is exactly its JSON escape.
    return text.encode("utf-8", "backslashreplace")


class JSONResponse(_StarletteJSONResponse):
    """Starlette's JSON answer, with a lone surrogate as its escape instead of a 500."""

    def render(self, content: Any) -> bytes:
        return json_bytes(content)


def csv_bytes(text: str) -> bytes:
    """Part of a CSV file as UTF-8; a lone surrogate as U+FFFD."""
    return text.encode("utf-8", _AS_REPLACEMENT_CHARACTER)
