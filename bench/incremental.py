"""`python -m bench.incremental`: what a sync asks the services for when little is new.

Counted at the services' side (the sandbox's own request counts, `GET /_sandbox/requests`),
for the `default` connection of each service, with rate limits and pacing off:

1. On a frozen sandbox, a full `python -m cli sync` (empty lake), then the counts are
   reset and the same sync runs again with nothing new: requests per stream and connection,
   target at most 1 each.
2. New trigger logs, then `python -m cli sync --streams comment.trigger_logs`:
   requests for N new logs beside ceil(N/200) + 1.

A frozen sandbox gets no new rows, even when its clock is advanced (sandbox/comment/
workspace.py `catch_up` returns early when frozen). So step 2 runs on a second sandbox,
live, anchored at the first one's moment (`--now`, same seed: the same history, so the lake
of step 1 is in sync with it), with one arrival a minute: the clock is advanced to just
past the N-th arrival, which leaves a minute of wall time before the next one, so nothing
arrives while the sync runs (checked: the truth is the same before and after it).

Every request is attributed to the stream(s) whose code asks for that path (`ROUTES`); one
that matches no route is reported as "unattributed", never dropped. After every sync the
warehouse's `comment.trigger_logs` must equal the sandbox's truth, ids unique.
"""

from __future__ import annotations

import argparse
import math
import re
import shutil
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import duckdb
import httpx

from assets import definitions
from bench.common import (
    COMMENT_KEY,
    ROOT,
    Traffic,
    free_port,
    measured_run,
    pipeline_env,
    report,
    sandbox,
    traffic,
)
from pipelines.clients import conversation, datahub
from pipelines.clients.comment import LOGS_PAGE_LIMIT
from sandbox.process import running_sandbox

DATA = ROOT / "data" / "bench" / "incremental"
SERVICES = ("comment", "conversation", "datahub")
UNPACED = {service: {"pace": False} for service in SERVICES}
#: Without a range, a sync re-pulls yesterday and today (docs/running.md).
CHANGING_DAYS = 2

# -- where each request goes -------------------------------------------------------------------
#
# The sandbox counts requests per method and path (no query), so a request is attributed by
# its path: which stream's code asks for it (assets/*.py, through the clients). A path that
# two streams ask for is one row naming both: the counts cannot tell them apart.

#: Comment automation: the client has no `PATHS` table; these are its methods' paths.
COMMENT_PATHS = {
    "/me": ("workspace",),
    "/accounts": ("accounts", "posts"),  # `posts` lists the accounts first
    "/accounts/{account_id}/posts": ("posts",),  # per account, posts and stories
    "/activities": ("activities", "activity_daily"),  # `activity_daily` lists them first
    "/activities/{activity_id}": ("activity_daily",),  # per activity: its 14-day trend
    "/logs": ("trigger_logs",),  # with its check `rows_equal_service_total` (one `total`)
    "/stats": ("daily_stats",),
}
#: Conversation and data hub: operations of the clients' `PATHS` tables, by stream.
CONVERSATION_OPERATIONS = {
    "trigger_messages_backup": ("messages",),
    "get_backup_detail": ("messages",),  # polled until the backup is completed
    "download_backup": ("messages",),
    "list_channels": ("channels",),
    "list_teams": ("teams",),
    "list_users": ("users",),
    "get_member_by_id": ("members",),  # per member seen in the landed messages
    "get_member_assignment": ("assignments",),  # idem
}
DATAHUB_OPERATIONS = {
    "list_custom_fields": ("custom_fields",),
    "list_broadcasts": ("broadcasts", "broadcast_reports"),  # the reports list them first
    "get_broadcast_report": ("broadcast_reports",),  # per broadcast that can still change
    "export_members": ("members",),
    "get_task_status": ("members",),  # the export task, polled (the push's imports too)
    "download_member_export": ("members",),
    # The push's operations are no stream: in a sync they would be unattributed.
}
#: Mount -> (service, connection). Comment automation serves every workspace on one mount
#: (the key tells them apart); only its `default` connection is configured here.
MOUNTS = {
    "/comment/api/v1": ("comment", "default"),
    "/conversation": ("conversation", "default"),
    "/conversation-jp": ("conversation", "jp"),
    "/datahub": ("datahub", "default"),
    "/datahub-jp": ("datahub", "jp"),
}
UNATTRIBUTED = "unattributed"


@dataclass(frozen=True)
class Route:
    mount: str
    template: str
    streams: tuple[str, ...]  # relations, e.g. ("comment.accounts", "comment.posts")
    pattern: re.Pattern

    @property
    def service(self) -> str:
        return MOUNTS[self.mount][0]

    @property
    def connection(self) -> str:
        return MOUNTS[self.mount][1]


def _routes() -> list[Route]:
    by_service = {
        "comment": COMMENT_PATHS,
        "conversation": {conversation.PATHS[op]: s for op, s in CONVERSATION_OPERATIONS.items()},
        "datahub": {datahub.PATHS[op]: s for op, s in DATAHUB_OPERATIONS.items()},
    }
    routes = []
    for mount, (service, _) in MOUNTS.items():
        for template, streams in by_service[service].items():
            regex = re.sub(r"\\\{[a-z_]+\\\}", "[^/]+", re.escape(mount + template))
            relations = tuple(f"{service}.{name}" for name in streams)
            routes.append(Route(mount, template, relations, re.compile(regex + "$")))
    unknown = {r for route in routes for r in route.streams} - {
        s.relation for s in definitions.STREAMS
    }
    assert not unknown, f"routes name no stream: {unknown}"
    return routes


ROUTES = _routes()


@dataclass
class Attributed:
    """Requests of one group of streams on one connection, per method and path template."""

    streams: tuple[str, ...]
    connection: str
    paths: Counter

    @property
    def requests(self) -> int:
        return sum(self.paths.values())

    def describe(self) -> str:
        return ", ".join(f"{what} x{n}" for what, n in sorted(self.paths.items())) or "-"


def attribute(seen: Traffic) -> list[Attributed]:
    """Every request of `seen` in exactly one group: its route's streams, or unattributed
    (with its raw path). Groups of the default connections are listed even with no request."""
    groups: dict[tuple, Attributed] = {}
    for route in ROUTES:
        if route.connection == "default":
            key = (route.streams, route.connection)
            groups.setdefault(key, Attributed(route.streams, route.connection, Counter()))
    for entry in seen.paths:
        route = next((r for r in ROUTES if r.pattern.match(entry["path"])), None)
        if route is None:
            key, what = ((UNATTRIBUTED,), "?"), f"{entry['method']} {entry['path']}"
        else:
            key, what = (route.streams, route.connection), f"{entry['method']} {route.template}"
        group = groups.setdefault(key, Attributed(*key, Counter()))
        group.paths[what] += entry["count"]
    groups.setdefault(((UNATTRIBUTED,), "?"), Attributed((UNATTRIBUTED,), "?", Counter()))
    return list(groups.values())


def requests_of(seen: Traffic, relation: str) -> int:
    """Requests attributed to `relation` alone (not to a path it shares)."""
    return sum(g.requests for g in attribute(seen) if g.streams == (relation,))


# -- truth and warehouse ------------------------------------------------------------------------


def workspace_of(base: str) -> str:
    """The comment automation workspace of the key (the truth is keyed by it). Asked before
    counting starts: it is a request too."""
    answer = httpx.get(
        f"{base}/comment/api/v1/me", headers={"Authorization": f"Bearer {COMMENT_KEY}"}
    )
    return answer.raise_for_status().json()["workspace"]["id"]


def truth_logs(base: str, workspace: str) -> int:
    truth = httpx.get(f"{base}/_sandbox/truth", timeout=300).raise_for_status().json()
    return truth["comment"][workspace]["trigger_logs"]


def landed_logs(env: dict[str, str], since: str | None = None) -> tuple[int, int]:
    """(rows, distinct ids) of `comment.trigger_logs` in the warehouse, read-only."""
    where = f"WHERE date >= DATE '{since}'" if since else ""
    with duckdb.connect(env["WAREHOUSE_PATH"], read_only=True) as con:
        [(rows, ids)] = con.execute(
            f"SELECT count(*), count(DISTINCT id) FROM comment.trigger_logs {where}"
        ).fetchall()
    return rows, ids


def logs_check(env: dict[str, str], base: str, workspace: str, after: str) -> dict:
    rows, ids = landed_logs(env)
    truth = truth_logs(base, workspace)
    return {"after": after, "lake": rows, "truth": truth, "equal": rows == ids == truth}


def run_sync(env: dict[str, str], *args: str) -> float:
    measured = measured_run(["cli", "sync", *args], env)
    if measured.exit_code:
        raise RuntimeError(f"cli sync {' '.join(args)} exited {measured.exit_code}")
    return measured.wall_seconds


# -- 1. nothing new ---------------------------------------------------------------------------


def nothing_new_rows(seen: Traffic, skipped: list[str], expected_skipped: dict) -> list[dict]:
    rows = []
    for group in attribute(seen):
        # At most 1 per stream sharing the path; nothing may go unattributed.
        limit = 0 if group.streams == (UNATTRIBUTED,) else len(group.streams)
        row = {
            "sync": "nothing new",
            "streams": " + ".join(group.streams),
            "connection": group.connection,
            "requests": group.requests,
            "paths": group.describe(),
            "target": f"<= {limit}",
            "met": group.requests <= limit,
        }
        if set(group.streams) & set(skipped):
            row.update(
                requests=None,
                paths=f"not run at this scale (a full sync looks up each of the "
                f"{expected_skipped[group.streams]:,} members seen); with nothing new, 0 by "
                "design: test_members_are_looked_up_again_only_for_new_messages",
                met=None,
            )
        rows.append(row)
    return rows


# -- 2. N new trigger logs --------------------------------------------------------------------

#: One new trigger log per minute of data time on the live sandbox: after the clock is
#: advanced past an arrival, the next is a minute of wall time away.
ARRIVALS_PER_MINUTE = 1.0
#: New logs wanted (data time: one a minute), fewer if the day would end first.
NEW_LOGS = 400


def new_logs_row(base: str, env: dict[str, str], workspace: str, before: int) -> tuple[dict, dict]:
    """Advance the live sandbox to just past the arrival that makes `NEW_LOGS` new logs (not
    past today), sync the trigger logs, and count the requests."""
    clock = httpx.get(f"{base}/_sandbox/clock").raise_for_status().json()
    now = datetime.fromisoformat(clock["now"])
    anchor = datetime.fromisoformat(clock["anchor"])
    period = 60 / ARRIVALS_PER_MINUTE
    elapsed = (now - anchor).total_seconds()
    # Data time stays within the sandbox's (and the pipeline's) today, with a margin.
    day_end = datetime.combine(now.date() + timedelta(days=1), datetime.min.time(), UTC)
    room = int(((day_end - now).total_seconds() - 600) // period)
    arrivals = int(elapsed // period) + max(1, min(NEW_LOGS, room))
    # Just past arrival number `arrivals` (at anchor + arrivals x period).
    httpx.post(
        f"{base}/_sandbox/clock/advance",
        params={"seconds": arrivals * period + 1 - elapsed},
    ).raise_for_status()
    truth_before = truth_logs(base, workspace)
    new = truth_before - before  # arrivals with no running activity are lost: measured
    traffic(base, reset=True)
    wall = run_sync(env, "--streams", "comment.trigger_logs")
    seen = traffic(base)
    truth_after = truth_logs(base, workspace)
    requests = requests_of(seen, "comment.trigger_logs")
    since = (datetime.now(UTC).date() - timedelta(days=CHANGING_DAYS - 1)).isoformat()
    changing_rows, _ = landed_logs(env, since)
    ideal = math.ceil(new / LOGS_PAGE_LIMIT) + 1
    # The pages up to the newest landed log, then the check's one request for the total.
    design = new // LOGS_PAGE_LIMIT + 1 + 1
    fallback = math.ceil(changing_rows / LOGS_PAGE_LIMIT) + 1
    check = logs_check(env, base, workspace, f"{new} new logs")
    row = {
        "sync": f"{new} new trigger logs",
        "streams": "comment.trigger_logs",
        "connection": "default",
        "requests": requests,
        "paths": f"GET /logs x{requests}; by design {new}//200 + 1 + the check's 1 = {design}",
        "target": f"<= ceil({new}/200)+1 = {ideal}",
        "met": requests <= ideal,
        "lake = truth": check["equal"] and truth_after == truth_before,
    }
    details = {
        "new_logs": new,
        "rows_of_yesterday_and_today": changing_rows,
        "requests_by_design": design,
        "requests_if_the_two_days_were_paged_again": fallback,
        "ideal_requests": ideal,
        "arrivals_during_sync": truth_after - truth_before,
        "wall_s": round(wall, 1),
        "other_requests": seen.count() - requests,
        "check": check,
    }
    return row, details


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.incremental", description=__doc__)
    parser.add_argument("--scale", default="large")
    parser.add_argument(
        "--skip",
        nargs="*",
        metavar="RELATION",
        help="streams left out of both full syncs (default at large: conversation.members "
        "and conversation.assignments, one lookup per member: minutes per sync)",
    )
    args = parser.parse_args(argv)
    skipped = args.skip
    if skipped is None:
        skipped = (
            ["conversation.members", "conversation.assignments"] if args.scale == "large" else []
        )
    streams = [s.relation for s in definitions.STREAMS if s.relation not in skipped]
    selection = ["--streams", *streams] if skipped else []

    shutil.rmtree(DATA, ignore_errors=True)
    checks, walls = [], {}
    with sandbox("--no-rate-limits", scale=args.scale) as base:
        workspace = workspace_of(base)
        anchor = httpx.get(f"{base}/_sandbox/clock").raise_for_status().json()["anchor"]
        truth = httpx.get(f"{base}/_sandbox/truth", timeout=300).json()
        members_seen = truth["conversation"]["default"]["members"]
        expected_skipped = {
            ("conversation.members",): members_seen,
            ("conversation.assignments",): members_seen,
        }
        env = pipeline_env(base, DATA, SERVICES, UNPACED)
        traffic(base, reset=True)
        walls["full sync"] = run_sync(env, *selection)
        checks.append(logs_check(env, base, workspace, "full sync"))
        first = traffic(base, reset=True)
        walls["nothing new"] = run_sync(env, *selection)
        seen = traffic(base)
        checks.append(logs_check(env, base, workspace, "nothing new"))
    rows = nothing_new_rows(seen, skipped, expected_skipped)
    for row in rows:
        if row["streams"] == "comment.trigger_logs":
            row["lake = truth"] = checks[-1]["equal"]

    live = (
        "--scale",
        args.scale,
        "--no-rate-limits",
        "--now",
        anchor,
        "--arrivals-per-minute",
        str(ARRIVALS_PER_MINUTE),
    )
    with running_sandbox(free_port(), *live, startup_seconds=300) as base:
        env = pipeline_env(base, DATA, ("comment",), UNPACED)
        if workspace_of(base) != workspace or truth_logs(base, workspace) < checks[-1]["lake"]:
            raise RuntimeError("the live sandbox does not hold the frozen one's history")
        row, new_logs = new_logs_row(base, env, workspace, checks[-1]["lake"])
    rows.append(row)
    checks.append(new_logs.pop("check"))

    report(
        "incremental",
        rows,
        scale=args.scale,
        skipped_streams=skipped,
        requests_full_sync=first.count(),
        requests_nothing_new=seen.count(),
        refused=seen.refused,
        wall_s={name: round(s, 1) for name, s in walls.items()},
        trigger_logs_lake_vs_truth=checks,
        new_trigger_logs=new_logs,
        figures_may_be_noisy="2 cores shared with other benchmarks",
    )
    correct = all(c["equal"] for c in checks) and new_logs["arrivals_during_sync"] == 0
    return 0 if correct else 1


if __name__ == "__main__":
    raise SystemExit(main())
