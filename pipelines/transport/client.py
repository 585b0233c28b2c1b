"""The one HTTP transport every client uses, for pull and push alike.

It adds the key, paces requests under the documented rate limit before any 429 is met,
retries what is safe to retry (with full-jitter exponential backoff that honours
`retry_after` / `Retry-After`), and counts requests, 429s and retries for the metadata of
each materialization. The API key only ever lives in the request headers: it is never part
of a message, a log line or an exception.

`Transport` ties together the parts beside it in `pipelines/transport/`: `pacing.py`,
`connections.py` (proxies, TLS), `retries.py`, `decoding.py`, `downloads.py`, `refusals.py`
(`ServiceError`) and `stats.py` (`CallStats`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

import httpx
import pydantic
import pydantic_core
import tenacity

from pipelines.state.budget import BudgetStore
from pipelines.transport.connections import REQUEST_HEADERS, connection_pool
from pipelines.transport.decoding import TruncatedBody, any_json, decode_readable, whole_json
from pipelines.transport.downloads import BackgroundChunks
from pipelines.transport.pacing import Rate, pacer_for
from pipelines.transport.refusals import ServiceError
from pipelines.transport.retries import (
    MAX_RETRY_AFTER,
    RETRY_STATUSES,
    RetryableStatus,
    RetryPolicy,
    retry_after_seconds,
    retrying,
)
from pipelines.transport.stats import CallStats

T = TypeVar("T", bound=pydantic.BaseModel)

#: The header of a body `_request` has encoded itself (httpx sets it only for its own `json=`).
JSON_CONTENT = {"Content-Type": "application/json"}


class Transport:
    """One connection's requests (base address and key), sent through an httpx transport
    (`connection_pool`). `rates` are paced on `budget`, the store the key's budget is shared
    in, or in this process without one.

    Not `httpx.Client`: of what it adds per request we use none (cookies, redirects, auth
    flows, merging its settings into each request), and that was much of the CPU of a
    page of trigger logs: it parses each URL three times and runs a cookie jar over every
    answer (bench: peer). A request built here is parsed once."""

    def __init__(
        self,
        base_url: str,
        auth_headers: Mapping[str, str],
        *,
        api_key: str,
        rates: Mapping[str, Rate] | None = None,
        budget: BudgetStore | None = None,
        retry: RetryPolicy | None = None,
        timeout: float = 60.0,
        stats: CallStats | None = None,
        http_transport: httpx.BaseTransport | None = None,
    ) -> None:
        base = httpx.URL(base_url.rstrip("/"))
        self._base_url = str(base)
        self._headers = httpx.Headers({**REQUEST_HEADERS, **auth_headers})
        self._timeout = httpx.Timeout(timeout).as_dict()
        self._http = http_transport or connection_pool(base)
        self._pacers = {
            bucket: pacer_for(api_key, bucket, rate, budget, self._base_url)
            for bucket, rate in (rates or {}).items()
        }
        self.retry = retry or RetryPolicy()
        self.stats = stats or CallStats()

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the one request path -------------------------------------------------------------

    def _retrying(self, idempotent: bool) -> tenacity.Retrying:
        return retrying(self.retry, self.stats, idempotent)

    def _build(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Request:
        """`path` (no query: that is `params`) under the base address, with the key."""
        return httpx.Request(
            method,
            httpx.URL(self._base_url + path, params=params),
            headers=self._headers if headers is None else {**self._headers, **headers},
            content=content,
            extensions={"timeout": self._timeout},
        )

    def _send(self, method: str, path: str, bucket: str | None, **kwargs: Any) -> httpx.Response:
        pacer = self._pacers.get(bucket or "default")
        self.stats.add(requests=1, waited=pacer.wait() if pacer else 0.0)
        request = self._build(method, path, **kwargs)
        response = self._http.handle_request(request)
        response.request = request
        if response.status_code < 400:
            return response
        try:
            response.read()
        finally:
            response.close()
        try:
            body = decode_readable(any_json, response.content)
        except TruncatedBody:
            body = response.text
        error = ServiceError(method, path, response.status_code, body)
        if response.status_code in RETRY_STATUSES:
            retry_after = retry_after_seconds(response)
            if response.status_code == 429:
                self.stats.add(throttled=1)
                if pacer and retry_after:
                    pacer.hold(min(retry_after, MAX_RETRY_AFTER))
            raise RetryableStatus(error, retry_after)
        raise error

    def request_json(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json_body: Any = None,
        bucket: str | None = None,
        idempotent: bool = True,
    ) -> Any:
        """Send one call and return its decoded JSON body, retrying what may be retried."""
        return self._request(method, path, any_json, params, json_body, bucket, idempotent)

    def get(
        self,
        path: str,
        model: type[T] | pydantic.TypeAdapter,
        *,
        params: Mapping[str, Any] | None = None,
        bucket: str | None = None,
    ) -> Any:
        """GET and validate the body as `model` (a model, or a TypeAdapter of plain types for
        bulk rows): pydantic parses the bytes itself, with no Python objects in between."""
        validate = (
            model.validate_json
            if isinstance(model, pydantic.TypeAdapter)
            else model.model_validate_json
        )
        return self.get_decoded(path, whole_json(validate), params=params, bucket=bucket)

    def get_decoded(
        self,
        path: str,
        decode: Callable[[bytes], Any],
        *,
        params: Mapping[str, Any] | None = None,
        bucket: str | None = None,
    ) -> Any:
        """GET with the body turned into a value by `decode`; a `TruncatedBody` it raises is
        asked again, as a cut answer is."""
        return self._request("GET", path, decode, params, None, bucket, True)

    def _request(
        self,
        method: str,
        path: str,
        decode: Callable[[bytes], Any],
        params: Mapping[str, Any] | None,
        json_body: Any,
        bucket: str | None,
        idempotent: bool,
    ) -> Any:
        """The one request path: send, retry what may be retried, decode the whole body."""
        kwargs: dict[str, Any] = {"params": params}
        if json_body is not None:
            # pydantic's serializer (Rust) encodes a body faster than httpx's `json.dumps`
            # (bench: push), and once for all attempts: a push sends a body per record.
            kwargs["content"] = pydantic_core.to_json(json_body)
            kwargs["headers"] = JSON_CONTENT
        try:
            for attempt in self._retrying(idempotent or method == "GET"):
                with attempt:
                    response = self._send(method, path, bucket, **kwargs)
                    try:
                        content = response.read()
                    finally:
                        response.close()
                    try:
                        decoded = decode_readable(decode, content)
                    except TruncatedBody as exc:
                        raise TruncatedBody(f"{method} {path}: {exc}") from None
                    self.stats.add(pages=1)
                    return decoded
        except RetryableStatus as exc:
            raise exc.error from None
        raise AssertionError("unreachable")  # pragma: no cover

    @contextmanager
    def download(self, path: str, *, bucket: str | None = None) -> Iterator[Iterator[bytes]]:
        """Stream a file. A cut stream raises, so the caller restarts the whole download
        (see `download_with_retry`) rather than landing half a file."""
        for attempt in self._retrying(True):
            with attempt:
                response = self._send("GET", path, bucket)
        reader = BackgroundChunks(response)
        try:
            yield iter(reader)
        finally:
            reader.close()

    def download_with_retry(self, path: str, consume: Callable[[Iterator[bytes]], T]) -> T:
        """Run `consume` over the file's bytes; a transport error mid-stream starts over."""
        for attempt in self._retrying(True):
            with attempt, self.download(path) as chunks:
                return consume(chunks)
        raise AssertionError("unreachable")  # pragma: no cover
