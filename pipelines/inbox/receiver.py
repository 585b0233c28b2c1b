"""What the two receivers share (`pipelines/webhooks/receiver.py`,
`pipelines/agent/receiver.py`): reading a body within a bound, the app around a receiver's
one route, and `python -m ...`'s plumbing (`main`): its settings, the inbox opened, the
server started with a log that holds nothing a caller sent (`pipelines/inbox/serving.py`), and
what is closed when it stops."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from pipelines.errors import SyncError
from pipelines.inbox.serving import serve
from pipelines.inbox.storage import Stored
from pipelines.lake.object_store import checked_root, place, verify


async def bounded_body(request: Request, limit: int) -> bytes | None:
    """The body, or None as soon as it is known to exceed `limit` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


def receiver_app(path: str, receive: Callable[[Request], Awaitable[Response]]) -> Starlette:
    """`receive` answering POSTs at `path`, and `GET /health`."""

    async def health(_: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[
            Route(path, receive, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
        ]
    )


@dataclass
class Receiver:
    """A receiver ready to serve: its inbox (closed when the server stops), its app, what its
    first line says after the inbox's location, and what else to close after serving."""

    inbox: Stored
    app: Starlette
    described: str = ""
    close: Callable[[], None] = field(default=lambda: None)


@dataclass(frozen=True)
class Command:
    """A receiver's `python -m` command: its name in `prog` and at the start of its lines
    (`name`), the path it answers at, and the setting its secret comes from (`secret_is` says
    what that holds)."""

    prog: str
    name: str
    path: str
    secret_variable: str
    secret_is: str


def main(
    argv: list[str] | None,
    command: Command,
    description: str | None,
    start: Callable[[str, str], Receiver],
) -> int:
    """`prog --port P [--host H]`: the secret from `command.secret_variable` only (never an
    argument, which `ps` would show, and never logged), the receiver made by
    `start(lake_root, secret)` and served until stopped. A setting's fault exits 2, the inbox
    out of reach or damaged 1, each in one line starting with the command's name."""
    parser = argparse.ArgumentParser(prog=command.prog, description=description)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    args = parser.parse_args(argv)
    secret = os.environ.get(command.secret_variable)
    if not secret:
        parser.error(f"{command.secret_variable} is not set: {command.secret_is}")
    try:
        # Written as the settings write it (`pipelines/settings.py`): the shared inbox's scope.
        lake_root = checked_root(os.environ.get("LAKE_ROOT", "data/lake"))
        lake = place(lake_root)
        if lake.local:  # a store is not asked: the receiver stores while it is away
            verify(lake)
        receiver = start(lake_root, secret)
    except SyncError as problem:  # a setting (2), the inbox out of reach or damaged (1)
        print(f"{command.name}: {problem}", file=sys.stderr)
        return problem.exit_code
    with receiver.inbox:
        print(
            f"{command.name}: http://{args.host}:{args.port}{command.path}, "
            f"inbox {receiver.inbox.location}{receiver.described}",
            flush=True,
        )
        serve(receiver.app, args.host, args.port)
        receiver.close()
    return 0
