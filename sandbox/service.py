"""What the app needs of each emulated service, and the two ways they authenticate."""

from __future__ import annotations

from typing import Protocol

from fastapi import APIRouter, FastAPI, Request, Security
from fastapi.security import APIKeyHeader

from sandbox.context import APIKEYS, COMMENT_KEYS
from sandbox.encoding import JSONResponse
from sandbox.errors import ApiError, install_error_handlers


class Service(Protocol):
    service: str  # "comment", "conversation" or "datahub"
    region: str  # "default" or "jp"; the comment automation service has one deployment
    app: FastAPI  # mounted at its base path; serves its own /openapi.json
    admin: APIRouter  # mounted at /_sandbox/{service}/{region}

    def catch_up(self) -> None:
        """Bring live arrivals and asynchronous tasks up to the clock (each service also does
        it before serving a request or a truth read)."""

    def truth(self) -> dict[str, dict[str, int]]:
        """Exact row count of every pulled stream, per scope (workspace id, or region)."""

    def truth_ids(self, scope: str, stream: str) -> list:
        """The ids of one stream's rows; KeyError for an unknown scope or stream."""

    def truth_days(self, scope: str, stream: str) -> dict[str, int]:
        """Rows per UTC day (`YYYY-MM-DD`, every served day, zeros included) of a daily stream;
        KeyError for an unknown scope or a stream without days."""


def service_app(title: str) -> FastAPI:
    """A service's app: its OpenAPI document at `<base>/openapi.json`, no docs pages, and
    every error in the one error shape."""
    app = FastAPI(
        title=title,
        version="1.0.0",
        openapi_url="/openapi.json",
        docs_url=None,
        redoc_url=None,
        # Also for routes that return plain values: FastAPI's own encoder refuses lone
        # surrogates (sandbox/encoding.py).
        default_response_class=JSONResponse,
    )
    install_error_handlers(app)
    return app


def bearer_key(request: Request) -> tuple[str, str, str]:
    """Comment automation auth (spec section 5): `Authorization: Bearer sa_live_…`.

    Returns (key, workspace, scope). Missing or unknown key: 401 `unauthorized`.
    """
    header = request.headers.get("authorization", "")
    scheme, _, key = header.partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key.startswith("sa_live_") or key not in COMMENT_KEYS:
        raise ApiError(
            401,
            "unauthorized",
            "missing or invalid API key",
            action_url="https://dashboard.example/api-keys",
        )
    workspace, scope = COMMENT_KEYS[key]
    return key, workspace, scope


# Declared through FastAPI's security helper so the OpenAPI documents name the header.
_APIKEY_HEADER = APIKeyHeader(name="apikey", auto_error=False)


def apikey(key: str | None = Security(_APIKEY_HEADER)) -> str:
    """Conversation service and data hub auth: the `apikey` header (section 5 of both)."""
    if key not in APIKEYS:
        raise ApiError(401, "unauthorized", "missing or invalid apikey header")
    return key
