"""One ASGI app serving all three services, their OpenAPI documents and the ground truth."""

from __future__ import annotations

from collections.abc import Callable

import httpx
from fastapi import Body, FastAPI, HTTPException

from sandbox.comment import build as build_comment
from sandbox.config import SandboxConfig
from sandbox.context import MOUNTS, Sandbox
from sandbox.conversation import build as build_conversation
from sandbox.conversation.agent import AgentCaller
from sandbox.datahub import build as build_datahub
from sandbox.drift import DriftInjector
from sandbox.encoding import JSONResponse
from sandbox.faults import FaultInjector, FaultSpec
from sandbox.service import Service
from sandbox.traffic import Traffic


class SandboxApp:
    """The ASGI callable: faults around the services; `/_sandbox/` left untouched."""

    def __init__(
        self, config: SandboxConfig, webhook_transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.sandbox = Sandbox.create(config, webhook_transport)
        self.traffic = Traffic()
        self.agent = _agent_caller(config)
        hubs = {region: build_datahub(self.sandbox, region) for region in ("default", "jp")}
        # The people who write to the brand's conversation channels are the hub's members.
        conversations = {
            region: build_conversation(
                self.sandbox, region, self.agent, hub.hub.contacts.channel_member_ids()
            )
            for region, hub in hubs.items()
        }
        self.services: dict[tuple[str, str], Service] = {
            ("comment", "default"): build_comment(self.sandbox),
            **{("conversation", region): service for region, service in conversations.items()},
            **{("datahub", region): service for region, service in hubs.items()},
        }
        root = FastAPI(
            title="sandbox",
            openapi_url="/_sandbox/openapi.json",
            docs_url=None,
            redoc_url=None,
            # The truth and records routes return plain values, which may hold lone surrogates.
            default_response_class=JSONResponse,
        )
        self._add_admin_routes(root)
        for key, service in self.services.items():
            root.include_router(service.admin, prefix=f"/_sandbox/{key[0]}/{key[1]}")
            root.mount(MOUNTS[key], service.app)
        # Drift reshapes answers inside the faults, which may then cut or refuse them; with no
        # drift configured it is not in the chain at all (the benches serve a million logs).
        self.drift = (
            DriftInjector(root, config.drift, self.sandbox.clock, MOUNTS) if config.drift else None
        )
        self.faults = FaultInjector(self.drift or root, config.faults, seed=config.seed)
        self.sandbox.faults = self.faults
        self.sandbox.webhooks.attach_faults(self.faults)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and not scope["path"].startswith("/_sandbox"):
            self.traffic.record(scope["method"], scope["path"])
        await self.faults(scope, receive, send)

    def truth(self) -> dict:
        result: dict[str, dict] = {}
        for (name, _), service in self.services.items():
            result.setdefault(name, {}).update(service.truth())
        if self.drift is not None:
            result["drift"] = self.drift.report()
        return result

    def _truth_of(self, service: str, scope: str, stream: str, read: Callable) -> object:
        """`read(deployment)` of the service's deployment (region) that holds the scope and
        stream (KeyError from the others); 404 if none does."""
        for (name, _), candidate in self.services.items():
            if name != service:
                continue
            try:
                return read(candidate)
            except KeyError:
                continue
        raise HTTPException(404, f"no stream {service}/{scope}/{stream}")

    def _add_admin_routes(self, root: FastAPI) -> None:
        sandbox = self.sandbox

        @root.get("/_sandbox/truth")
        def truth() -> dict:
            return self.truth()

        @root.get("/_sandbox/truth/{service}/{scope}/{stream}/ids")
        def truth_ids(service: str, scope: str, stream: str) -> dict:
            ids = self._truth_of(service, scope, stream, lambda s: s.truth_ids(scope, stream))
            return {"ids": ids}

        @root.get("/_sandbox/truth/{service}/{scope}/{stream}/days")
        def truth_days(service: str, scope: str, stream: str) -> dict:
            """Rows per UTC day of a daily stream: comment `trigger_logs` and `daily_stats`
            (scope: workspace id), conversation `messages` (scope: region)."""
            days = self._truth_of(service, scope, stream, lambda s: s.truth_days(scope, stream))
            return {"days": days}

        @root.get("/_sandbox/truth/{service}/{scope}/{stream}/rows")
        def truth_rows(service: str, scope: str, stream: str) -> dict:
            """Every row of a stream as the service holds it now: comment `activities`
            (scope: workspace id), each as `GET /activities` serves it; conversation
            `assignments` (scope: region), each member seen in messages as
            `get_member_assignment` serves it."""

            def read(deployment) -> list:
                if not hasattr(deployment, "truth_rows"):
                    raise KeyError(stream)
                return deployment.truth_rows(scope, stream)

            return {"rows": self._truth_of(service, scope, stream, read)}

        @root.get("/_sandbox/records/{record_type}/{key}")
        def record(record_type: str, key: str, region: str = "default") -> dict:
            service = self.services.get(("datahub", region))
            if service is None:
                raise HTTPException(404, f"no data hub region {region!r}")
            found = service.current_record(record_type, key)
            if found is None:
                raise HTTPException(404, f"no {record_type} record {key!r} in {region}")
            return found

        @root.get("/_sandbox/drift")
        def drift() -> dict:
            """The drift spec and what was served drifted (sandbox/drift.py); `streams` is
            empty when no drift is configured."""
            if self.drift is None:
                return {"from": None, "active": False, "streams": {}}
            return self.drift.report()

        @root.get("/_sandbox/faults")
        def faults() -> dict:
            return {"spec": self.faults.spec.as_dict(), "injected": self.faults.injected}

        @root.put("/_sandbox/faults")
        def set_faults(values: dict = Body(...)) -> dict:  # noqa: B008 (FastAPI's idiom)
            try:
                self.faults.spec = FaultSpec.from_dict(values)
            except ValueError as exc:
                raise HTTPException(400, str(exc)) from None
            return {"spec": self.faults.spec.as_dict()}

        @root.get("/_sandbox/clock")
        def clock() -> dict:
            return {
                "now": sandbox.clock.now().isoformat(),
                "frozen": sandbox.clock.frozen,
                "anchor": sandbox.clock.anchor.isoformat(),
            }

        @root.post("/_sandbox/clock/advance")
        def advance(seconds: float) -> dict:
            """Move the data clock; what it brings (arrivals, webhooks, finished tasks) happens
            now, not at the next request."""
            if seconds < 0:
                raise HTTPException(400, "seconds must not be negative: time only moves forward")
            sandbox.clock.advance(seconds)
            for service in self.services.values():
                service.catch_up()
            return clock()

        @root.get("/_sandbox/requests")
        def requests() -> dict:
            """Requests per method and path since start (or the last reset), and how many
            the rate limiter refused."""
            return {"paths": self.traffic.summary(), "refused": sandbox.limiter.refused}

        @root.delete("/_sandbox/requests")
        def reset_requests() -> dict:
            self.traffic.reset()
            sandbox.limiter.refused = 0
            return {"paths": [], "refused": 0}

        @root.get("/_sandbox/webhooks")
        def webhooks(wait: float = 0.0) -> dict:
            idle = sandbox.webhooks.wait_idle(wait) if wait else sandbox.webhooks.pending() == 0
            return {"idle": idle, "deliveries": [d.summary() for d in sandbox.webhooks.deliveries]}

        @root.get("/_sandbox/agent")
        def agent(wait: float = 0.0) -> dict:
            """The conversation service's calls to the brand's AI agent
            (sandbox/conversation/agent.py): once every turn of the messages arrived by now
            is answered or given up on, or `wait` seconds passed (`idle` says which)."""
            if self.agent is None:
                return {"idle": True, "calls": []}
            for (name, _), service in self.services.items():
                if name == "conversation":
                    service.catch_up()
            idle = self.agent.wait_idle(wait)
            return {"idle": idle, "calls": [call.summary() for call in self.agent.calls]}


def _agent_caller(config: SandboxConfig) -> AgentCaller | None:
    """The caller of the brand's AI agent, when one is configured."""
    if bool(config.agent_url) != bool(config.agent_token):
        raise ValueError("agent_url and agent_token go together")
    if not config.agent_url:
        return None
    return AgentCaller(config.agent_url, config.agent_token, config.agent_retry_delay)


def build_app(
    config: SandboxConfig | None = None,
    webhook_transport: httpx.AsyncBaseTransport | None = None,
) -> SandboxApp:
    return SandboxApp(config or SandboxConfig(), webhook_transport)
