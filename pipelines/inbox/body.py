"""A receiver's body read as a JSON object, each way it can fail named in the receiver's own
words (`pipelines/webhooks/envelope.py`, `pipelines/agent/request.py`): whatever the bytes,
the result is the object or the receiver's refusal, never another exception."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Refusals:
    """What a receiver says of a body that is not a JSON object; `{exc}` in a text is
    replaced with the parser's message."""

    malformed: str
    too_deep: str
    unreadable: str
    not_an_object: str


def json_object(body: bytes, says: Refusals, refused: Callable[[str], Exception]) -> dict:
    """The body's JSON object, or `refused(reason)` raised."""
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise refused(says.malformed.format(exc=exc)) from None
    except RecursionError:
        # Python's parser recurses once per level; the documented bodies nest a few levels.
        raise refused(says.too_deep) from None
    except ValueError as exc:
        # An integer of over 4,300 digits (CPython's bound on int(str)).
        raise refused(says.unreadable.format(exc=exc)) from None
    if not isinstance(document, dict):
        raise refused(says.not_an_object)
    return document
