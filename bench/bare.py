"""`python -m bench.bare WHAT OUT …`: the floor of a pull, plain httpx and nothing else, run in
a process of its own (`bench.measure`) so its time, CPU and memory are measured as the
pipeline's are. The services' addresses and keys are read from the same variables the
pipeline reads (`COMMENT_AUTOMATION_URL`, …), and it writes what it fetched to OUT (JSON):

- `trigger_logs --days D --limit L --in-flight N`: every page of the served days, N requests
  in flight, each body dropped once its logs are counted (`rows`);
- `messages_backup --days D FILE`: a backup of the last D days (to tomorrow 00:00 UTC, the
  window of a full sync), polled as the pipeline polls, its CSV file written to FILE;
- `member_export FILE`: a member export, polled the same way, its CSV file written to FILE;
- `workspace`: the one request of the workspace stream (`GET /me`), its workspace counted.

The files are counted afterwards by whoever ran it, outside the measured process.

Imports nothing of the product: a floor carries no cost of ours (the benchmark checks that
the paths below are the clients' own, `bench/peer.py`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NamedTuple

import httpx

#: The conversation and data hub operations a download takes, as the clients' `PATHS` name them.
CONVERSATION_PATHS = {
    "trigger_messages_backup": "/v1/backups/messages",
    "get_backup_detail": "/v1/backups/{backup_id}",
    "download_backup": "/v1/backups/{backup_id}/download",
}
DATAHUB_PATHS = {
    "export_members": "/v1/members/export",
    "get_task_status": "/task/{task_id}",
    "download_member_export": "/v1/members/export/{task_id}/file",
}
#: A trigger log's own key: it stands once in each log, and never unescaped inside a text.
LOG_KEY = b'"created_at":'
#: Polling as the pipeline's (`pipelines/clients/polling.py`): 0.2 s, doubling, at most 5 s.
FIRST_POLL_SECONDS = 0.2
MAX_POLL_SECONDS = 5.0
TIMEOUT_SECONDS = 60


def _client(url_variable: str, headers: dict[str, str]) -> httpx.Client:
    return httpx.Client(base_url=os.environ[url_variable], headers=headers, timeout=TIMEOUT_SECONDS)


def workspace() -> dict:
    """The workspace stream's one request: `rows` 1 when the answer holds a workspace."""
    key = os.environ["COMMENT_AUTOMATION_API_KEY"]
    with _client("COMMENT_AUTOMATION_URL", {"Authorization": f"Bearer {key}"}) as client:
        me = client.get("/me").raise_for_status().json()
    return {"rows": int(bool(me.get("workspace"))), "requests": 1}


def trigger_logs(days: int, limit: int, in_flight: int) -> dict:
    """Every page of the last `days` days' logs; how many logs and requests."""
    key = os.environ["COMMENT_AUTOMATION_API_KEY"]
    with _client("COMMENT_AUTOMATION_URL", {"Authorization": f"Bearer {key}"}) as client:

        def logs_on(page: int) -> int:
            params = {"days": days, "page": page, "limit": limit}
            return client.get("/logs", params=params).raise_for_status().content.count(LOG_KEY)

        total = client.get("/logs", params={"days": days, "limit": 1}).json()["total"]
        pages = math.ceil(total / limit)
        with ThreadPoolExecutor(in_flight) as pool:
            rows = sum(pool.map(logs_on, range(pages)))
    return {"rows": rows, "requests": pages + 1}


class Job(NamedTuple):
    """An asynchronous job: its id's field in the start's answer, the paths of its state and
    of its file (`{}` its id), and when it is done."""

    id_field: str
    state: str
    file: str
    done: Callable[[dict], bool]


def _job_file(client: httpx.Client, start: str, body: dict, job: Job, file: Path) -> dict:
    """Start the job, poll it as the pipeline does until `job.done`, write its file to `file`;
    the job's last state and the file's size."""
    job_id = client.post(start, json=body).raise_for_status().json()[job.id_field]
    wait = FIRST_POLL_SECONDS
    while not job.done(state := client.get(job.state.format(job_id)).raise_for_status().json()):
        time.sleep(wait)
        wait = min(wait * 2, MAX_POLL_SECONDS)
    size = 0
    with client.stream("GET", job.file.format(job_id)) as answer, file.open("wb") as out:
        answer.raise_for_status()
        for chunk in answer.iter_bytes():
            size += out.write(chunk)
    return {"bytes": size, "state": state}


def messages_backup(days: int, file: Path) -> dict:
    end = datetime.combine(datetime.now(UTC).date() + timedelta(days=1), datetime.min.time(), UTC)
    window = {"started_at": (end - timedelta(days=days)).isoformat(), "ended_at": end.isoformat()}
    paths = CONVERSATION_PATHS
    backup = Job(
        "backup_id",
        paths["get_backup_detail"].replace("{backup_id}", "{}"),
        paths["download_backup"].replace("{backup_id}", "{}"),
        lambda state: state["state"] == "completed",
    )
    with _client("CONVERSATION_URL", {"apikey": os.environ["CONVERSATION_API_KEY"]}) as client:
        return _job_file(client, paths["trigger_messages_backup"], window, backup, file)


def member_export(file: Path) -> dict:
    paths = DATAHUB_PATHS
    export = Job(
        "id",
        paths["get_task_status"].replace("{task_id}", "{}"),
        paths["download_member_export"].replace("{task_id}", "{}"),
        lambda state: state["status"] in ("success", "done"),
    )
    with _client("DATAHUB_URL", {"apikey": os.environ["DATAHUB_API_KEY"]}) as client:
        return _job_file(client, paths["export_members"], {}, export, file)


def parser(prog: str, description: str | None) -> argparse.ArgumentParser:
    """The arguments of a floor (this module's, and `bench/in_dagster.py`'s)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(
        "what", choices=["trigger_logs", "messages_backup", "member_export", "workspace"]
    )
    parser.add_argument("out", type=Path)
    parser.add_argument("file", type=Path, nargs="?")
    parser.add_argument("--days", type=int)
    parser.add_argument("--limit", type=int)
    parser.add_argument("--in-flight", type=int, default=1)
    return parser


def fetch(args: argparse.Namespace) -> dict:
    """The floor the arguments name, run; what it fetched."""
    if args.what == "trigger_logs":
        return trigger_logs(args.days, args.limit, args.in_flight)
    if args.what == "messages_backup":
        return messages_backup(args.days, args.file)
    if args.what == "member_export":
        return member_export(args.file)
    return workspace()


def main(argv: list[str] | None = None) -> None:
    args = parser("python -m bench.bare", __doc__).parse_args(argv)
    args.out.write_text(json.dumps(fetch(args)))


if __name__ == "__main__":
    main()
