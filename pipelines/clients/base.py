"""What every service client shares: connections, models that tolerate new fields, and a
service's settings (`Service`: its connections, pacing, timeouts), from which each of its
connections gets a transport. The Dagster layer makes each `Service` a resource
(`assets/resources.py`); nothing here knows of Dagster."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Annotated, Any, ClassVar
from urllib.parse import quote

import pydantic

from pipelines.errors import SetupError
from pipelines.lake import check_connection_name
from pipelines.lake.drift import Contract
from pipelines.mistakes import closest
from pipelines.state.budget import shared_budget
from pipelines.transport import CallStats, Rate, RetryPolicy, Transport

#: A date-time the model parses from ISO 8601 text: lax even in the strict `Model`, where
#: text is how JSON carries it, not a change of type.
Parsed = Annotated[datetime, pydantic.Strict(False)]


class Model(pydantic.BaseModel):
    """A response model that drift never fails: a field the service adds later is kept (in
    `model_extra`), and a value that does not fit its field strictly (a number sent as text,
    an object sent as null) or a required field left out does not fail the answer: the value
    is converted where pydantic's lax rules can, else the field is None, and what was sent is
    kept in `retyped` (a field left out is None and not in `model_fields_set`).
    `pipelines/lake/drift.py` turns these into the lake's `_extra` column and the landing's drift
    report.

    A field's docstring says what it holds where the service's documentation does; it
    becomes its column's description in the catalog (`pipelines/lake/schemas.py`)."""

    # Strict, so that a changed type is noticed even where lax rules would convert it.
    model_config = pydantic.ConfigDict(extra="allow", strict=True)

    #: Values as sent that did not fit their field strictly, by field name.
    _retyped: dict[str, Any] = pydantic.PrivateAttr(default_factory=dict)

    @pydantic.model_validator(mode="wrap")
    @classmethod
    def _tolerate_drift(cls, data: Any, handler: pydantic.ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(data)
        except pydantic.ValidationError as error:
            if not isinstance(data, dict) or any(not e["loc"] for e in error.errors()):
                raise  # not an object at all: the answer is not what the service documents
            return cls._tolerant(data)

    @classmethod
    def _tolerant(cls, data: dict) -> Model:
        """The record field by field: each that fits strictly as is, one that fits only
        laxly converted (and kept as sent), one that fits not at all as None."""
        fields = cls.model_fields
        record = cls.model_construct(**{k: v for k, v in data.items() if k not in fields})
        retyped: dict[str, Any] = {}
        for name, info in fields.items():
            if name not in data:
                if info.is_required():
                    record.__dict__[name] = None  # absent: not in `model_fields_set`
                continue
            try:
                cls.__pydantic_validator__.validate_assignment(record, name, data[name])
                continue
            except pydantic.ValidationError:
                retyped[name] = data[name]
            try:
                cls.__pydantic_validator__.validate_assignment(
                    record, name, data[name], strict=False
                )
            except pydantic.ValidationError:
                record.__dict__[name] = None
        record._retyped = retyped
        return record

    @property
    def retyped(self) -> dict[str, Any]:
        return self._retyped


def fill_path(template: str, **values: object) -> str:
    """A path template of a `PATHS` table with its parameters, each quoted as one segment."""
    return template.format(**{name: quote(str(value), safe="") for name, value in values.items()})


def check_path_overrides(service: str, overrides: dict[str, str], known: dict[str, str]):
    """A path override names an operation of the table; a misspelt one is refused."""
    unknown = sorted(set(overrides) - set(known))
    if unknown:
        raise ValueError(
            f"unknown operations {unknown}{closest(unknown[0], list(known))}; "
            f"known: {', '.join(sorted(known))}"
        )
    return overrides


#: Variables already warned about in this process (a warning per run, not per request).
_warned: set[str] = set()


class Connection(pydantic.BaseModel):
    """One account on one deployment: a workspace key, or a region's key. The key is read
    from `api_key_env` when a transport opens, so a missing one fails that connection only,
    and no configuration (Dagster's included) ever holds it."""

    name: str = pydantic.Field(description="lowercase; lands in every row as `connection`")
    base_url: str
    #: The environment variable that holds the key.
    api_key_env: str = ""
    #: Where `base_url` is set (a variable, or the config file's entry), for error messages.
    base_url_from: str = ""
    #: A key given directly (tests, benchmarks) instead of through `api_key_env`.
    api_key: str | None = None

    @pydantic.field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_connection_name(value)

    def key(self, service: str) -> str:
        """The key, checked: a missing one, or one holding what no header can carry, is a
        `SetupError` that names the variable, never its value. Whitespace around it (a
        copied line break) is dropped with a warning."""
        raw = self.api_key if self.api_key is not None else os.environ.get(self.api_key_env)
        where = f"{service} connection {self.name!r}"
        if not raw or not raw.strip():
            raise SetupError(
                f"{where}: the environment variable {self.api_key_env} that holds its API key "
                "is not set or empty: set it to this connection's key"
            )
        key = raw.strip()
        if key != raw and self.api_key_env not in _warned:
            _warned.add(self.api_key_env)
            logging.getLogger("pipelines").warning(
                f"{where}: {self.api_key_env} has spaces or a line break around the key (a "
                "copy-paste?); they were dropped. Remove them from the variable."
            )
        if not key.isascii() or not key.isprintable() or any(c.isspace() for c in key):
            raise SetupError(
                f"{where}: {self.api_key_env} holds characters an HTTP header cannot carry "
                "(a space, a line break or a non-ASCII letter inside the key): set it to the "
                "key alone"
            )
        return key


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
    #: Connections a landing takes at once (`each_connection`, pipelines/clients/failures.py):
    #: each has its own key, so its own budget, and its own region; 1 lands them in turn.
    connections_at_once: int = pydantic.Field(8, ge=1)
    #: Per stream of the service (its name, `trigger_logs`), what a landing does with drift:
    #: evolve (the default), freeze or discard (`pipelines/lake/drift.py`).
    contracts: dict[str, Contract] = {}

    def contract(self, stream: str) -> Contract:
        return self.contracts.get(stream, Contract.EVOLVE)

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"apikey": api_key}

    def scaled_rates(self) -> dict[str, Rate]:
        if not self.pace:
            return {}
        scale = self.rate_window_seconds / 60.0
        return {bucket: Rate(r.requests, r.per_seconds * scale) for bucket, r in self.rates.items()}

    @contextmanager
    def transport(self, connection: Connection, stats: CallStats) -> Iterator[Transport]:
        """The connection's transport; its paced buckets share the key's budget with every
        process through the store `SYNC_BUDGET_STORE` names (`pipelines/state/budget.py`)."""
        key = connection.key(self.service)
        rates = self.scaled_rates()
        with Transport(
            connection.base_url,
            self.auth_headers(key),
            api_key=key,
            rates=rates,
            budget=shared_budget() if rates else None,
            retry=RetryPolicy(attempts=self.retry_attempts),
            timeout=self.timeout_seconds,
            stats=stats,
        ) as transport:
            yield transport
