"""The error for an answer the service refused that retrying cannot change (`ServiceError`):
raised by `pipelines/transport/client.py`, carried by `RetryableStatus`
(`pipelines/transport/retries.py`) while asking again may still help."""

from __future__ import annotations

from typing import Any

from pipelines.errors import ServiceRefused


class ServiceError(ServiceRefused):
    """An answer the service gave that retrying cannot change (or retries ran out)."""

    def __init__(self, method: str, path: str, status: int, body: Any) -> None:
        error = body.get("error", {}) if isinstance(body, dict) else {}
        self.status = status
        self.code = error.get("code")
        self.field = error.get("field")
        detail = error.get("message") or (str(body)[:200] if body else "")
        where = f" (field {self.field})" if self.field else ""
        super().__init__(f"{method} {path} answered {status} {self.code or ''}{where}: {detail}")
