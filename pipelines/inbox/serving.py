"""How the two receivers are served (`python -m pipelines.webhooks`, `python -m pipelines.agent`,
both through `pipelines/inbox/receiver.py`): uvicorn, with a log that holds nothing a caller
sent.

A caller's query string, headers and body may hold a secret (a token put in the query string
by mistake, a signature), so no line quotes them:

- uvicorn's access log is off: it prints the query string, and a client address read from
  `X-Forwarded-For`. `AccessLog` writes one line a request instead: the method, the path
  where it is one of the receiver's routes, and the status, `POST /agent/reply 200`;
- a traceback is left out, its exception's class kept (`NoTraceback`): uvicorn's for a
  request it cannot parse quotes the request line, and an exception's text may quote a body;
- websockets are off (neither receiver has one): uvicorn logs their path with its query.

The receivers' own lines (`pipelines/webhooks/receiver.py`, `pipelines/agent/receiver.py`)
are made of their own words, the inbox's failure, or a request's key (a hash).
"""

from __future__ import annotations

import logging
import logging.config
from typing import Any

import uvicorn
from starlette.applications import Starlette
from uvicorn.logging import DefaultFormatter

access = logging.getLogger("pipelines.access")

#: Methods told by name in the access log; another is a caller's text.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class NoTraceback(logging.Filter):
    """A record's traceback left out; its exception's class said after the message."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[0] is not None:
            record.msg = f"{record.getMessage().strip()} ({record.exc_info[0].__name__})"
            record.args = None
        record.exc_info = record.exc_text = record.stack_info = None
        return True


LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"no_traceback": {"()": NoTraceback}},
    "formatters": {"line": {"()": DefaultFormatter, "fmt": "%(levelprefix)s %(message)s"}},
    "handlers": {
        "stderr": {
            "class": "logging.StreamHandler",
            "stream": "ext://sys.stderr",
            "formatter": "line",
            "filters": ["no_traceback"],
        }
    },
    "loggers": {
        "uvicorn": {"handlers": ["stderr"], "level": "INFO", "propagate": False},
        "pipelines": {"handlers": ["stderr"], "level": "WARNING", "propagate": False},
        access.name: {"level": "INFO"},
    },
}


class AccessLog:
    """ASGI middleware: one line a request, `<method> <path> <status>`, of the receiver's
    words only (a path that is not one of its routes is `(another path)`)."""

    def __init__(self, app: Starlette) -> None:
        self.app = app
        self.paths = {route.path for route in app.routes}

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # where the app fails before it answers, uvicorn answers 500

        async def sending(message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            method = scope["method"] if scope["method"] in METHODS else "(another method)"
            path = scope["path"] if scope["path"] in self.paths else "(another path)"
            access.info("%s %s %d", method, path, status)


def serve(app: Starlette, host: str, port: int) -> None:
    """Serve `app` until stopped, logging as this module says."""
    logging.config.dictConfig(LOGGING)
    uvicorn.run(
        AccessLog(app),
        host=host,
        port=port,
        log_config=None,
        log_level="info",
        access_log=False,
        ws="none",
    )
