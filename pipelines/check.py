"""`python -m pipelines check`: is the setup right? One cheap authenticated call per
connection (the cheapest read each service documents), and the webhook receiver's secret
present, each with ok or the reason and what to do (`pipelines/clients/failures.py`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from pipelines.clients.base import Service
from pipelines.clients.comment import CommentClient
from pipelines.clients.failures import isolated
from pipelines.transport import CallStats, Transport
from pipelines.webhooks.receiver import SECRET_VARIABLE

#: The call each service's check makes, by service.
PROBES: dict[str, Callable[[Service, Transport], object]] = {
    "comment": lambda service, transport: CommentClient(transport).me(),
    "conversation": lambda service, transport: service.client(transport).list_channels(),
    "datahub": lambda service, transport: service.client(transport).list_custom_fields(),
}


@dataclass(frozen=True)
class Checked:
    service: str
    connection: str
    url: str
    problem: str = ""
    #: Something to know that stops nothing here.
    warning: str = ""

    @property
    def ok(self) -> bool:
        return not self.problem

    @property
    def result(self) -> str:
        """`ok`, `WARN` or `FAILED`, as the check's table shows it."""
        return "FAILED" if self.problem else "WARN" if self.warning else "ok"


def check_connections(services: dict[str, Service]) -> list[Checked]:
    """Every connection of every service, each checked on its own, with one retry at most:
    a check should answer in seconds."""
    checked = []
    for name, service in services.items():
        quick = service.model_copy(update={"retry_attempts": 2, "timeout_seconds": 10.0})
        for connection in service.connections:
            failed: dict[str, str] = {}
            with (
                isolated(service, connection, failed),
                quick.transport(connection, CallStats()) as transport,
            ):
                PROBES[name](quick, transport)
            checked.append(
                Checked(name, connection.name, connection.base_url, failed.get(connection.name, ""))
            )
    return checked


def check_webhook_secret() -> Checked:
    """A warning, not a failure, where the secret is missing: only the receiver needs it,
    and it refuses to start without it (`pipelines/webhooks/__main__.py`), so a host that
    pulls and pushes is right without it."""
    present = bool(os.environ.get(SECRET_VARIABLE, "").strip())
    warning = (
        ""
        if present
        else (
            f"{SECRET_VARIABLE} is not set: the webhook receiver needs the data hub's signing "
            "secret; set it where the receiver runs (pulls and pushes do not need it)"
        )
    )
    return Checked("datahub", "webhooks", f"${SECRET_VARIABLE}", warning=warning)
