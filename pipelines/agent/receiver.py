"""The ASGI app that answers the conversation service's AI agent calls at `/agent/reply`.

In order (the service's documentation: a POST of the AI agent request with
`Authorization: Bearer <AGENT_TOKEN>`, answered `{reply_text}` within 45 s; the statuses are
the choices of docs/agent.md):
1. no `Authorization: Bearer <token>`, or another token (compared in constant time): 401,
   nothing stored;
2. a body over `max_body_bytes`: 413, nothing stored;
3. a body that is not an AI agent request (`pipelines/agent/request.py`): 400 with the
   reason, kept in the inbox's `rejected` table with its body;
4. otherwise the request is committed to the inbox, its answer asked for
   (`pipelines/agent/reply.py`: the brand's function within its deadline, or the handover),
   committed beside it, then sent: 200 `{reply_text}`. A request already answered (the
   service sending it again) gets the answer stored for it and is not kept again; one stored
   but not answered (its receiver died, or a replica answers it now) is answered, and the
   first answer stored is the one both callers get.

Nothing a caller sends gets a 500. A failure to store (the disk, the shared store) is a 503,
logged in one line, never with a traceback: nothing was answered, and the service may send
the turn again. The token is never logged, nor stored, and no line quotes what the caller
sent (`pipelines/inbox/serving.py` says what is logged).
"""

from __future__ import annotations

import hmac
import logging
from datetime import UTC, datetime

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from pipelines.agent.reply import Replier
from pipelines.agent.request import NotARequest, parse_request
from pipelines.agent.turns import Inbox
from pipelines.inbox.receiver import bounded_body, receiver_app
from pipelines.state.shared_store import StoreUnavailable

AGENT_PATH = "/agent/reply"
#: The variable the receiver reads the token the service sends from (`__main__.py`).
TOKEN_VARIABLE = "AGENT_TOKEN"
#: A turn carries a conversation's messages as text and links: far under this.
MAX_BODY_BYTES = 1 << 20

log = logging.getLogger("pipelines.agent")


def token_matches(header: str | None, token: bytes) -> bool:
    scheme, _, given = (header or "").partition(" ")
    # Headers arrive as latin-1 text, so any value encodes back.
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode("latin-1"), token
    )


def build_app(
    inbox: Inbox, token: str, replier: Replier, max_body_bytes: int = MAX_BODY_BYTES
) -> Starlette:
    expected = token.encode("utf-8")

    async def reply(request: Request) -> JSONResponse:
        received_at = datetime.now(UTC)
        if not token_matches(request.headers.get("authorization"), expected):
            missing = "authorization" not in request.headers
            reason = "Authorization missing" if missing else "Authorization is not the agent token"
            log.warning("refused an agent call: %s", reason)
            return JSONResponse({"error": reason}, 401)
        body = await bounded_body(request, max_body_bytes)
        if body is None:
            log.warning("refused an agent call over %d bytes", max_body_bytes)
            return JSONResponse({"error": f"body over {max_body_bytes} bytes"}, 413)
        try:
            try:
                turn, key = parse_request(body)
            except NotARequest as problem:
                await run_in_threadpool(inbox.reject, received_at, str(problem), body)
                # The reason may quote the body: it is kept with it, not logged.
                log.warning("rejected an agent call (400): kept with its reason in the inbox")
                return JSONResponse({"error": str(problem)}, 400)
            first = await run_in_threadpool(inbox.store, key, received_at, body)
            # A request stored just now has no answer yet: only a copy's is looked up.
            stored = None if first else await run_in_threadpool(inbox.answer_of, key)
            if stored is None:
                answer = await replier.answer(turn)
                stored = await run_in_threadpool(inbox.store_answer, key, answer, datetime.now(UTC))
        except StoreUnavailable as problem:
            log.error("could not keep an agent call: %s", problem)
            return JSONResponse({"error": "the agent inbox cannot store the call now"}, 503)
        if stored.answer.outcome not in ("replied", "default"):
            # Named by its key: the conversation and the error are the body's and the
            # function's words, kept with the answer.
            log.warning("request %s handed over (%s)", key, stored.answer.outcome)
        return JSONResponse({"reply_text": stored.answer.reply_text})

    return receiver_app(AGENT_PATH, reply)
