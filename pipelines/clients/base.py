"""What every service client shares: connections, models that tolerate new fields, and a
service's settings (`Service`: its connections, pacing, timeouts), from which each of its
connections gets a transport. The Dagster layer makes each `Service` a resource
(`assets/resources.py`); nothing here knows of Dagster."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, ClassVar
from urllib.parse import quote

import pydantic

from pipelines.lake import check_connection_name
from pipelines.transport import CallStats, Rate, RetryPolicy, Transport

#: A date-time the service writes as ISO 8601 text. The model keeps the text (a time without
#: offset stays readable); the lake holds it as its `TIMESTAMP` (`pipelines/schemas.py`).
Moment = Annotated[str, "ISO 8601 date-time"]
#: A calendar day the service writes as ISO 8601 text (`2026-10-01`); the lake holds a date.
Day = Annotated[str, "ISO 8601 date"]


class Model(pydantic.BaseModel):
    """A response model: a field the service adds later is kept, never an error."""

    model_config = pydantic.ConfigDict(extra="allow")


def fill_path(template: str, **values: object) -> str:
    """A path template of a `PATHS` table with its parameters, each quoted as one segment."""
    return template.format(**{name: quote(str(value), safe="") for name, value in values.items()})


def check_path_overrides(service: str, overrides: dict[str, str], known: dict[str, str]):
    """A path override names an operation of the table; a misspelt one is refused."""
    unknown = sorted(set(overrides) - set(known))
    if unknown:
        raise ValueError(f"[paths.{service}]: unknown operations {unknown}; known: {sorted(known)}")
    return overrides


class Connection(pydantic.BaseModel):
    """One account on one deployment: a workspace key, or a region's key."""

    name: str = pydantic.Field(description="lowercase; lands in every row as `connection`")
    base_url: str
    api_key: str = pydantic.Field(description="read from the environment, never written")

    @pydantic.field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_connection_name(value)


class Service(pydantic.BaseModel):
    """A service's settings. Subclasses set `service`, `rates` and `auth_headers`."""

    service: ClassVar[str]
    #: The service's documented rate limits, per bucket of operations.
    rates: ClassVar[dict[str, Rate]] = {}

    connections: list[Connection]
    #: The window the per-minute limits apply to (60 s; smaller for time-scaled benchmarks).
    rate_window_seconds: float = 60.0
    pace: bool = True
    timeout_seconds: float = 60.0
    retry_attempts: int = 8

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"apikey": api_key}

    def scaled_rates(self) -> dict[str, Rate]:
        if not self.pace:
            return {}
        scale = self.rate_window_seconds / 60.0
        return {bucket: Rate(r.requests, r.per_seconds * scale) for bucket, r in self.rates.items()}

    @contextmanager
    def transport(self, connection: Connection, stats: CallStats) -> Iterator[Transport]:
        with Transport(
            connection.base_url,
            self.auth_headers(connection.api_key),
            api_key=connection.api_key,
            rates=self.scaled_rates(),
            retry=RetryPolicy(attempts=self.retry_attempts),
            timeout=self.timeout_seconds,
            stats=stats,
        ) as transport:
            yield transport
