"""Error answers.

The comment automation spec fixes the body `{error: {code, message, field?, action_url?,
retry_after?}}`. The conversation service and the data hub do not show theirs; the sandbox
uses the same shape for them (see sandbox/README.md), so one client rule reads all three.
"""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from sandbox.encoding import JSONResponse


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        field: str | None = None,
        action_url: str | None = None,
        retry_after: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.action_url = action_url
        self.retry_after = retry_after
        self.headers = headers or {}

    def response(self) -> JSONResponse:
        body = {"code": self.code, "message": self.message}
        for name in ("field", "action_url", "retry_after"):
            value = getattr(self, name)
            if value is not None:
                body[name] = value
        return JSONResponse({"error": body}, status_code=self.status, headers=self.headers)


def invalid(field: str, message: str) -> ApiError:
    """400 naming the offending input, as comment automation section 7 describes."""
    return ApiError(400, "invalid_request", f"{field}: {message}", field=field)


def not_found(what: str) -> ApiError:
    return ApiError(404, "not_found", f"{what} not found")


def _field_of(loc: tuple) -> str:
    # Drop the request part ("body", "query", "path") so the field reads like the spec's name.
    parts = [str(p) for p in loc[1:]] if loc and loc[0] in ("body", "query", "path") else list(loc)
    return ".".join(parts) or "body"


ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string"},
                "message": {"type": "string"},
                "field": {"type": "string"},
                "action_url": {"type": "string"},
                "retry_after": {"type": "integer"},
            },
        }
    },
}


def _document_errors(app: FastAPI) -> None:
    """Say in the OpenAPI document what the handlers do: 400 (not FastAPI's 422) and errors
    in the one error shape."""
    generate = app.openapi

    def openapi() -> dict:
        if app.openapi_schema:
            return app.openapi_schema
        schema = generate()
        error = {
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
        }
        for methods in schema.get("paths", {}).values():
            for operation in methods.values():
                responses = operation.setdefault("responses", {})
                responses.pop("422", None)
                responses.setdefault("400", {"description": "Invalid request", **error})
                responses.setdefault("default", {"description": "Error", **error})
        schemas = schema.setdefault("components", {}).setdefault("schemas", {})
        schemas.pop("HTTPValidationError", None)
        schemas.pop("ValidationError", None)
        schemas["Error"] = ERROR_SCHEMA
        app.openapi_schema = schema
        return schema

    app.openapi = openapi


def install_error_handlers(app: FastAPI) -> None:
    """Every error of a service app leaves in the one error shape; no input yields a 500."""
    _document_errors(app)

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0]
        field = _field_of(tuple(first.get("loc", ())))
        if first.get("type") == "json_invalid":
            field = "body"
        message = str(first.get("msg", "invalid value"))
        return invalid(field, message).response()

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {404: "not_found", 405: "method_not_allowed"}
        code = codes.get(exc.status_code, "invalid_request")
        return ApiError(exc.status_code, code, str(exc.detail)).response()
