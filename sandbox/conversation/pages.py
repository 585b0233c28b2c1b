"""Cursor pagination of channels, teams and users (spec section 4), in stable id order.

The token is opaque: urlsafe base64 of `id:<boundary id>`. Passed as `cursor` or `after` it
asks for the rows after the boundary, as `before` for the rows just before it. In answers,
`""` marks that no rows lie that way; sending `""` back is a 400, as is any token this API
did not issue.
"""

from __future__ import annotations

import base64
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

from fastapi import Query

from sandbox.errors import invalid


@dataclass(frozen=True)
class PageRequest:
    limit: int
    after: int | None = None
    before: int | None = None


def page_request(
    limit: int = Query(100, ge=1, le=1000),
    cursor: str | None = Query(None),
    after: str | None = Query(None),
    before: str | None = Query(None),
) -> PageRequest:
    given = [
        (name, token)
        for name, token in (("cursor", cursor), ("after", after), ("before", before))
        if token is not None
    ]
    if len(given) > 1:
        raise invalid("cursor", "pass the token as one of cursor, after or before")
    if not given:
        return PageRequest(limit)
    name, token = given[0]
    if name == "before":
        return PageRequest(limit, before=decode(token))
    return PageRequest(limit, after=decode(token))


def paginate(records: list[dict], request: PageRequest) -> tuple[list[dict], dict]:
    """One page of records sorted by id, and its `cursor` object."""
    ids = [record["id"] for record in records]
    if request.before is not None:
        stop = bisect_left(ids, request.before)
        start = max(0, stop - request.limit)
    else:
        start = 0 if request.after is None else bisect_right(ids, request.after)
        stop = min(len(ids), start + request.limit)
    after = encode(ids[stop - 1] if stop else ids[0] - 1) if stop < len(ids) else ""
    before = encode(ids[start] if start < len(ids) else ids[-1] + 1) if start > 0 else ""
    return records[start:stop], {"after": after, "before": before}


def encode(boundary: int) -> str:
    return base64.urlsafe_b64encode(f"id:{boundary}".encode()).decode().rstrip("=")


def decode(token: str) -> int:
    try:
        padded = token + "=" * (-len(token) % 4)
        text = base64.b64decode(padded, altchars=b"-_", validate=True).decode("ascii")
        prefix, _, number = text.partition(":")
        if prefix != "id" or not number.lstrip("-").isdigit():
            raise ValueError(text)
        return int(number)
    except ValueError:  # binascii and Unicode errors are ValueErrors too
        raise invalid("cursor", "not a pagination token of this API") from None
