"""The ASGI app that receives the data hub's webhooks at `/webhooks/datahub`.

In order (signature and idempotency key as the hub documents them; the answers are the
choices in the table of docs/data-flows.md):
1. a body over `max_body_bytes`: 413, nothing stored;
2. `Service-Signature` missing or not the hex HMAC-SHA256 of the raw body keyed with the
   UTF-8 secret (compared in constant time): 401, nothing stored;
3. no `Service-Idempotency-Key`, malformed JSON (or JSON Python cannot read: nested too
   deep, an integer too long), an incomplete envelope, an envelope field that is not valid
   Unicode text or a timestamp outside years 1-9999 in UTC: 400, kept in the inbox's
   `rejected` table with the reason and the raw body;
4. otherwise committed to the inbox, then 200; a key already stored is a duplicate: 200,
   not stored again (in a shared inbox, whichever replica got it first).

A signed body never gets a 500: reading it is a function of its bytes, so any failure to do
so is a 400 kept with its reason (the hub would resend the same bytes to the same end). 500
is left for a failure to store (the disk, the shared store's server), which a resend can
outlive; it is logged in one line, the inbox's `StoreUnavailable`, never with a traceback.
No line quotes what the caller sent (its headers, the idempotency key among them, or its
body): `pipelines/inbox/serving.py` says what is logged. A
lone surrogate inside `data` is stored like any other event; the compaction quarantines what
the lake cannot represent (`pipelines/webhooks/compaction.py`).

The inbox is written from Starlette's thread pool, so a commit's fsync never blocks the
event loop and other deliveries are read and verified meanwhile.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from datetime import UTC, datetime

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse

from pipelines.inbox.receiver import bounded_body, receiver_app
from pipelines.state.shared_store import StoreUnavailable
from pipelines.webhooks.envelope import Envelope, EnvelopeError, parse_envelope
from pipelines.webhooks.events import Arrival, WebhookInbox

WEBHOOK_PATH = "/webhooks/datahub"
#: The variable the receiver reads the data hub's signing secret from (`__main__.py`).
SECRET_VARIABLE = "WEBHOOK_SECRET"
#: Events are a few hundred bytes (an order.sync with 200 items a few dozen KB); anything
#: near this is not an event, and reading it whole would let a sender exhaust memory.
MAX_BODY_BYTES = 1 << 20

log = logging.getLogger("pipelines.webhooks")


def signature_matches(body: bytes, signature: str, key: bytes) -> bool:
    expected = hmac.new(key, body, hashlib.sha256).hexdigest().encode("ascii")
    # Hex is case-insensitive; headers arrive as latin-1 text, so any value encodes back.
    return hmac.compare_digest(expected, signature.lower().encode("latin-1"))


def envelope_or_reason(arrival: Arrival) -> Envelope | str:
    """The delivery's envelope, or why it has none: text the inbox and a JSON answer take."""
    try:
        if not arrival.idempotency_key:
            # The key is the only duplicate detection the hub documents.
            raise EnvelopeError("Service-Idempotency-Key missing")
        return parse_envelope(arrival.body)
    except EnvelopeError as problem:
        reason = str(problem)
    except Exception as problem:
        # A case parse_envelope does not name: still the body's, so still a 400.
        reason = f"the body could not be read ({type(problem).__name__})"
        log.error("could not read a webhook: %s", reason)
    return reason.encode("utf-8", "backslashreplace").decode("utf-8")


def build_app(inbox: WebhookInbox, secret: str, max_body_bytes: int = MAX_BODY_BYTES) -> Starlette:
    key = secret.encode("utf-8")

    async def receive_datahub(request: Request) -> JSONResponse:
        received_at = datetime.now(UTC)
        body = await bounded_body(request, max_body_bytes)
        if body is None:
            log.warning("refused a webhook body over %d bytes", max_body_bytes)
            return JSONResponse({"error": f"body over {max_body_bytes} bytes"}, 413)
        signature = request.headers.get("service-signature")
        if signature is None or not signature_matches(body, signature, key):
            reason = "signature missing" if signature is None else "signature mismatch"
            log.warning("refused a webhook: %s", reason)
            return JSONResponse({"error": reason}, 401)
        arrival = Arrival(
            idempotency_key=request.headers.get("service-idempotency-key"),
            user_agent=request.headers.get("user-agent"),
            content_type=request.headers.get("content-type"),
            body=body,
            received_at=received_at,
        )
        envelope = envelope_or_reason(arrival)
        try:
            if isinstance(envelope, str):
                await run_in_threadpool(inbox.reject, arrival, envelope)
                # The reason may quote the body: it is kept with it, not logged.
                log.warning("rejected a webhook (400): kept with its reason in the inbox")
                return JSONResponse({"error": envelope}, 400)
            stored = await run_in_threadpool(inbox.store, arrival, envelope)
        except StoreUnavailable as problem:
            # Nothing was kept: the hub resends on a 500. The message says all there is.
            log.error("could not store a webhook: %s", problem)
            return JSONResponse({"error": "the inbox cannot store the event now"}, 500)
        return JSONResponse({"status": "stored" if stored else "duplicate"})

    return receiver_app(WEBHOOK_PATH, receive_datahub)
