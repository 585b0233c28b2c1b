"""The answer to a turn: the reply function the brand names, within a deadline, or the
handover.

Settings (environment; docs/agent.md):
- `AGENT_REPLY`: `module:function`, called as `function(request, warehouse)` with the
  `AgentRequest` (`pipelines/agent/request.py`) and a read-only session on the warehouse
  (`WarehouseSession`), returning the reply text, or a routed handover
  (`{"handover": {"team_id": N}}`, `Route`). Unset: the default reply.
- `AGENT_DEFAULT_REPLY`: what the default reply says; unset, it hands over to a human
  (`<HUMAN_HANDOVER>`).
- `AGENT_REPLY_SECONDS`: the deadline, default 20 s, well inside the 45 s the service waits
  (its documented limit), so the answer reaches it with room for the network and a retry.

A reply function that raises, returns something other than text, or overruns the deadline
is answered with the handover, and the answer records which (`Answer.outcome`). An
overrunning function cannot be stopped (Python threads are not), so it runs on in its own
pool, bounded, while the turn is answered.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import duckdb

from pipelines.agent.request import AgentRequest
from pipelines.errors import SetupError, first_line
from pipelines.lake import Lake

HANDOVER = "<HUMAN_HANDOVER>"
REPLY_VARIABLE = "AGENT_REPLY"
DEFAULT_TEXT_VARIABLE = "AGENT_DEFAULT_REPLY"
DEADLINE_VARIABLE = "AGENT_REPLY_SECONDS"
DEFAULT_DEADLINE = 20.0
#: The service's own limit: a deadline at or past it would answer too late.
SERVICE_LIMIT = 45.0
#: Reply functions running at once; more wait their turn (within the deadline).
THREADS = 32
#: An error's text kept with its answer is cut here.
ERROR_CHARS = 300

#: What answered: the named function, with text or a routed handover (`Route`), the default
#: reply, or the handover because the function failed, overran the deadline or returned
#: something else.
OUTCOMES = ("replied", "routed", "default", "failed", "late", "not text")
#: How a routed member is assigned, as the service's "Manual assignment" takes it.
ASSIGN_TYPES = ("case-based", "permanent")


@dataclass(frozen=True)
class Route:
    """Whom a routed handover goes to: a team or a user of the conversation service, how the
    member is assigned, through which conversation connection (a region)."""

    team_id: int | None = None
    user_id: int | None = None
    assign_type: str = "case-based"
    connection: str = "default"

    @classmethod
    def of(cls, asked: object) -> Route:
        """A reply function's `{"handover": {"team_id": N}}` (or `user_id`, and optionally
        `assign_type`, `connection`); ValueError saying what is wrong with it."""
        if not isinstance(asked, dict) or set(asked) != {"handover"}:
            raise ValueError('expected text, or {"handover": {"team_id": N}} (or "user_id")')
        handover = asked["handover"]
        if not isinstance(handover, dict):
            raise ValueError('"handover" is not an object')
        unknown = set(handover) - {"team_id", "user_id", "assign_type", "connection"}
        if unknown:
            raise ValueError(f"unknown handover field(s) {sorted(unknown)}")
        ids = {name: handover.get(name) for name in ("team_id", "user_id")}
        for name, value in ids.items():
            if value is not None and (type(value) is not int or not 1 <= value < 2**63):
                raise ValueError(f"{name} is not a whole number from 1")
        if all(value is None for value in ids.values()):
            raise ValueError("the handover names no team_id or user_id")
        route = cls(
            **ids, **{k: handover[k] for k in ("assign_type", "connection") if k in handover}
        )
        if route.assign_type not in ASSIGN_TYPES:
            raise ValueError(f"assign_type is not one of {', '.join(ASSIGN_TYPES)}")
        if not isinstance(route.connection, str) or not route.connection:
            raise ValueError("connection is not a connection's name")
        return route

    def as_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | None) -> Route | None:
        return None if text is None else cls(**json.loads(text))


@dataclass(frozen=True)
class Answer:
    reply_text: str
    outcome: str
    error: str | None = None
    #: Where a routed handover goes; pushed as the member's assignment (docs/agent.md).
    route: Route | None = None

    @property
    def handover(self) -> bool:
        return HANDOVER in self.reply_text


class WarehouseSession:
    """A read-only DuckDB session on the warehouse, opened on first use (a reply that needs
    no data costs nothing) and closed after the reply: `execute(sql, parameters)` as DuckDB's."""

    def __init__(self, lake_root: str, warehouse_path: Path) -> None:
        self._lake_root = lake_root
        self._path = warehouse_path
        self._con: duckdb.DuckDBPyConnection | None = None

    def execute(self, query: str, parameters: object = None) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            self._con = Lake(self._lake_root).connect(self._path, read_only=True)
        return self._con.execute(query, parameters)

    def close(self) -> None:
        if self._con is not None:
            self._con.close()


ReplyFunction = Callable[[AgentRequest, WarehouseSession], object]


def load_function(spec: str) -> ReplyFunction:
    """`module:function`, imported; a `SetupError` naming `AGENT_REPLY` when it is not one."""
    module_name, _, name = spec.partition(":")
    if not module_name or not name:
        raise SetupError(
            f"{REPLY_VARIABLE}={spec!r} is not `module:function`: e.g. demo.agent:reply"
        )
    try:
        function = getattr(importlib.import_module(module_name), name)
    except Exception as exc:
        raise SetupError(
            f"{REPLY_VARIABLE}={spec!r} cannot be loaded ({first_line(exc)}): check the module "
            "is importable from the working directory and defines that function"
        ) from None
    if not callable(function):
        raise SetupError(f"{REPLY_VARIABLE}={spec!r} is not a function")
    return function


def deadline_of(env: Mapping[str, str]) -> float:
    text = env.get(DEADLINE_VARIABLE, "")
    try:
        seconds = float(text) if text else DEFAULT_DEADLINE
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < SERVICE_LIMIT:
        raise SetupError(
            f"{DEADLINE_VARIABLE}={text!r}: give seconds above 0 and under {SERVICE_LIMIT:g}, "
            "the service's own limit"
        )
    return seconds


class Replier:
    """Answers turns as the settings say; `answer` never raises for what a function does."""

    def __init__(
        self,
        function: ReplyFunction | None,
        default_text: str,
        deadline: float,
        session: Callable[[], WarehouseSession],
    ) -> None:
        self.function = function
        self.default = Answer(default_text, "default")
        self.deadline = deadline
        self._session = session
        self._pool = ThreadPoolExecutor(THREADS, thread_name_prefix="agent-reply")

    @classmethod
    def from_env(cls, lake_root: str, env: Mapping[str, str] | None = None) -> Replier:
        env = os.environ if env is None else env
        spec = env.get(REPLY_VARIABLE, "")
        warehouse = Path(env.get("WAREHOUSE_PATH", "data/warehouse.duckdb"))
        return cls(
            load_function(spec) if spec else None,
            env.get(DEFAULT_TEXT_VARIABLE) or HANDOVER,
            deadline_of(env),
            lambda: WarehouseSession(lake_root, warehouse),
        )

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def answer(self, request: AgentRequest) -> Answer:
        if self.function is None:
            return self.default
        work = asyncio.get_running_loop().run_in_executor(self._pool, self._call, request)
        try:
            return await asyncio.wait_for(work, self.deadline)
        except TimeoutError:
            return Answer(HANDOVER, "late", f"no reply within {self.deadline:g} s")

    def _call(self, request: AgentRequest) -> Answer:
        session = self._session()
        try:
            text = self.function(request, session)
        except Exception as exc:
            return Answer(HANDOVER, "failed", _cut(f"{type(exc).__name__}: {first_line(exc)}"))
        finally:
            session.close()
        if isinstance(text, dict):
            try:
                return Answer(HANDOVER, "routed", route=Route.of(text))
            except ValueError as wrong:
                return Answer(HANDOVER, "not text", _cut(f"the function returned {wrong}"))
        if not isinstance(text, str):
            return Answer(HANDOVER, "not text", f"the function returned {type(text).__name__}")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return Answer(HANDOVER, "not text", "the reply is not valid Unicode (a lone surrogate)")
        return Answer(text, "replied")


def _cut(text: str) -> str:
    """Storable whatever it holds, and short."""
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= ERROR_CHARS else text[: ERROR_CHARS - 1] + "…"
