"""The conversation service, one instance per region (conversation service spec).

Modules:
- `paths`: method and path of each operation (not shown by the spec; written down once);
- `models`: request and response models, each response form's exact fields;
- `directory`: channels, teams and users (small; dicts);
- `members`: members and their assignments (numpy columns);
- `messages`: a year of messages plus live arrivals (numpy columns);
- `backups`: message backup tasks and their CSV files;
- `agent`: the calls to the brand's AI agent, a turn per live member message;
- `pages`: cursor pagination; `routes`: the operations; `table`: growable columns.

The two regions hold different data: every generator is seeded with the region's name.
"""

from __future__ import annotations

from datetime import timedelta

from fastapi import APIRouter, Depends, HTTPException

from sandbox.clock import day_counts
from sandbox.context import MOUNTS, Sandbox
from sandbox.conversation.agent import AgentCaller, AgentTurns
from sandbox.conversation.backups import Backups
from sandbox.conversation.directory import Directory
from sandbox.conversation.members import Members
from sandbox.conversation.messages import Messages
from sandbox.conversation.paths import BACKUP_DOWNLOAD
from sandbox.conversation.routes import conversation_router
from sandbox.encoding import JSONResponse
from sandbox.fakedata import pools
from sandbox.service import apikey, service_app

STREAMS = ("channels", "teams", "users", "messages", "members", "assignments", "members_total")


class ConversationService:
    service = "conversation"

    def __init__(
        self,
        sandbox: Sandbox,
        region: str,
        mount: str,
        agent: AgentCaller | None = None,
        hub_ids: dict[str, list[str]] | None = None,
    ) -> None:
        self.region = region
        self._sandbox = sandbox
        shared = pools(sandbox.config.seed)
        self.directory = Directory(sandbox, region, shared)
        self.members = Members(sandbox, region, self.directory, shared, hub_ids)
        self.messages = Messages(sandbox, region, self.directory, self.members)
        download = f"{sandbox.config.public_url}{mount}{BACKUP_DOWNLOAD[1]}"
        self.backups = Backups(sandbox, region, self.messages, download)
        self.agent_turns = (
            None
            if agent is None
            else AgentTurns(sandbox, region, self.directory, self.members, self.messages, agent)
        )
        self.app = service_app(f"Conversation service ({region})")
        # Live messages are derived when a request comes (a thread only calls the agent, below);
        # backups need nothing done when they complete (see backups.py).
        live = Depends(self.catch_up)
        self.app.include_router(conversation_router(self), dependencies=[Depends(apikey), live])
        self.admin = APIRouter(tags=["sandbox"])
        self.admin.add_api_route("/teams/{team_id}/users", self._team_users, methods=["GET"])
        self.admin.add_api_route("/agent/replay", self._replay, methods=["POST"])
        self.admin.add_api_route("/members/reassign", self._reassign, methods=["POST"])
        # The agent is called as members write, asked or not: the one place the clock is
        # followed by a thread (last, so it never catches up a half-built service).
        if agent is not None and not sandbox.clock.frozen:
            agent.watch(self.catch_up)

    def catch_up(self) -> None:
        self.messages.catch_up()
        if self.agent_turns is not None:
            self.agent_turns.catch_up()

    def truth(self) -> dict[str, dict[str, int]]:
        self.catch_up()
        lo, hi = self.messages.year()
        seen = len(self.messages.member_rows(lo, hi))
        counts = {
            "channels": len(self.directory.channels),
            "teams": len(self.directory.teams),
            "users": len(self.directory.users),
            "messages": hi - lo,
            "members": seen,
            "assignments": seen,
            "members_total": self.members.size,
        }
        if self.agent_turns is not None:
            counts |= self.agent_turns.counts()
        return {self.region: counts}

    def truth_ids(self, scope: str, stream: str) -> list:
        if scope != self.region or stream not in STREAMS:
            raise KeyError(f"{scope}/{stream}")
        return self._ids(stream)

    def truth_days(self, scope: str, stream: str) -> dict[str, int]:
        """Messages per UTC day of the year up to now (its first day partly: the year starts
        365 days before this second)."""
        if scope != self.region or stream != "messages":
            raise KeyError(f"{scope}/{stream}")
        self.catch_up()
        now = self._sandbox.clock.now()
        lo, hi = self.messages.year()
        first = (now - timedelta(days=365)).date()
        return day_counts(self.messages.table["ts"][lo:hi], first, now.date())

    def _ids(self, stream: str) -> list:
        self.catch_up()
        if stream in ("channels", "teams", "users"):
            return [record["id"] for record in getattr(self.directory, stream)]
        if stream == "members_total":
            return [self.members.member_id(row) for row in range(self.members.size)]
        lo, hi = self.messages.year()
        if stream == "messages":
            return self.messages.uuids(lo, hi)
        # Members (and their assignments) are pulled by id for the members seen in messages.
        return (self.members.first_id + self.messages.member_rows(lo, hi)).tolist()

    def truth_rows(self, scope: str, stream: str) -> list[dict]:
        """Every assignment of the members seen in the year's messages, as
        `get_member_assignment` serves it now, with the member's channel and id."""
        if scope != self.region or stream != "assignments":
            raise KeyError(f"{scope}/{stream}")
        self.catch_up()
        return [
            self._assignment_row(int(row))
            for row in self.messages.member_rows(*self.messages.year())
        ]

    def _assignment_row(self, row: int) -> dict:
        channel = self.directory.channels[int(self.members.table["channel"][row])]
        assignment = self.members.assignment(row)
        return {
            "channel_id": channel["id"],
            "member_id": self.members.member_id(row),
            "assign_type": assignment["assign_type"],
            **assignment["assignment_relationship"],
        }

    def _reassign(self, count: int = 10) -> JSONResponse:
        """Sandbox only: an agent reassigns `count` members seen in the year's messages by
        hand, without a message: members spread evenly over them, each to the team after
        its own and an active human agent, `permanent`. Answers `{reassigned}`, each member
        as `truth_rows` gives it."""
        if not 1 <= count <= 10_000:
            raise HTTPException(400, "count must be 1 to 10000")
        self.catch_up()
        seen = self.messages.member_rows(*self.messages.year())
        rows = sorted({int(seen[n * len(seen) // count]) for n in range(min(count, len(seen)))})
        teams = [team["id"] for team in self.directory.teams]
        agents = self.directory.user_ids("human")
        for n, row in enumerate(rows):
            team = int(self.members.table["team"][row])
            after = teams[(teams.index(team) + 1) % len(teams)] if team in teams else teams[0]
            self.members.assign(row, "permanent", after, agents[n % len(agents)])
        return JSONResponse({"reassigned": [self._assignment_row(row) for row in rows]})

    def _replay(self, count: int = 20) -> JSONResponse:
        """Sandbox only: the agent is sent again the turns of the region's last `count` member
        messages of the history (`AgentTurns.replay`); 409 without an agent."""
        if self.agent_turns is None:
            raise HTTPException(409, "no agent is configured (--agent-url)")
        if not 0 <= count <= 10_000:
            raise HTTPException(400, "count must be 0 to 10000")
        return JSONResponse({"sent": self.agent_turns.replay(count)})

    def _team_users(self, team_id: int) -> JSONResponse:
        """Sandbox view of a team's users (the spec has no operation that shows them)."""
        if team_id not in self.directory.team_users:
            raise HTTPException(404, f"no team {team_id} in {self.region}")
        return JSONResponse({"user_ids": self.directory.team_users[team_id]})


def build(
    sandbox: Sandbox,
    region: str,
    agent: AgentCaller | None = None,
    hub_ids: dict[str, list[str]] | None = None,
) -> ConversationService:
    """`hub_ids`: see `Members`; the region's data hub contacts' channel ids."""
    return ConversationService(sandbox, region, MOUNTS[("conversation", region)], agent, hub_ids)
