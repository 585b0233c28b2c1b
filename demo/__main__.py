"""`make demo`: start a sandbox, run the full sync against it, show the warehouse, then push
a demo shop's records to the data hub and its members' assignments and closes to the
conversation service, twice (the second run sends nothing), plan a comment automation
activity kept as code (docs/activities.md; nothing is applied), and let the conversation
service's AI agent answer its members from the shop's orders (demo/agent.py) meanwhile; then
every webhook event the sandbox delivered and every turn the agent answered is landed, and
checked against the sandbox's own record of them. `python -m demo`.

The sandbox runs frozen (its data stops at start), so the warehouse must equal its ground
truth exactly; the table says so per relation. Two comment automation workspaces and both
regions of the other services are synced, so every row shows which connection it came from.

It speaks as the command line does (`assets/console.py`: the product's lines, not Dagster's),
and ends with how to go on: its settings in a file to source (`SETTINGS_FILE`), and the
command that starts its sandbox again.
"""

import argparse
import os
import secrets
import shlex
import shutil
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import httpx

import demo
from assets import definitions
from cli import activities
from cli.main import run_push_command, run_sync
from demo.shop import declare_shop, generate_shop
from pipelines.lake import Lake
from pipelines.settings import load_settings
from pipelines.warehouse.reconcile import reconcile
from sandbox.process import (
    RATE_WINDOW_SECONDS,
    point_at_sandbox,
    running_process,
    running_sandbox,
)

#: The file of the demo's settings, in its data folder.
SETTINGS_FILE = "settings.sh"


def land(relations: list[str], settings) -> None:
    """The receivers' inboxes compacted into the lake, as `python -m cli sync --streams
    <relation> …` does."""
    report = run_sync(relations, settings=settings)
    for step, message in report.failed.items():
        print(f"FAILED {step}: {message}", file=sys.stderr)


#: Seconds the demo waits for the sandbox to deliver its last webhook events, and for the
#: agent to answer its last turns.
WAIT_SECONDS = 120


def delivered_webhooks(base: str) -> tuple[dict[str, int], bool]:
    """Wait for the campaign's webhooks (and the push's `*.sync` events) to reach the
    receiver: the events the sandbox delivered per family (its `/_sandbox/webhooks`), and
    whether it delivered every event it had."""
    answer = httpx.get(
        f"{base}/_sandbox/webhooks", params={"wait": WAIT_SECONDS}, timeout=WAIT_SECONDS + 60
    )
    answer.raise_for_status()
    sent = answer.json()
    if not sent["idle"]:
        print(
            f"FAILED webhooks: the sandbox was still delivering after {WAIT_SECONDS} s; "
            "is the receiver answering? (GET /_sandbox/webhooks lists every attempt)",
            file=sys.stderr,
        )
    failed = sum(not d["delivered"] for d in sent["deliveries"])
    if failed:
        print(
            f"FAILED webhooks: the sandbox gave up on {failed} events after its retries; "
            "GET /_sandbox/webhooks lists what the receiver answered",
            file=sys.stderr,
        )
    delivered = Counter(d["event"].split(".")[0] for d in sent["deliveries"] if d["delivered"])
    return dict(sorted(delivered.items())), sent["idle"] and not failed


def landed_webhooks(settings) -> dict[str, int]:
    """The events in `datahub.webhook_events` per family."""
    with duckdb.connect(str(settings.warehouse_path), read_only=True) as con:
        rows = con.execute(
            "SELECT split_part(event, '.', 1), count(*) FROM datahub.webhook_events GROUP BY 1"
        ).fetchall()
    return dict(sorted(rows))


#: Member messages per region whose turns the frozen sandbox sends the agent again.
AGENT_TURNS = 300


def ask_agent(base: str) -> None:
    """The sandbox's service sends the agent the turns of its latest member messages; they
    are answered while the demo goes on (the agent reads the shop's orders, already written)."""
    for region in ("default", "jp"):
        replay = f"{base}/_sandbox/conversation/{region}/agent/replay"
        httpx.post(replay, params={"count": AGENT_TURNS}, timeout=60).raise_for_status()


def agent_calls(base: str) -> list[dict]:
    """Wait for the agent's last answers: the sandbox's calls to it."""
    answer = httpx.get(
        f"{base}/_sandbox/agent", params={"wait": WAIT_SECONDS}, timeout=WAIT_SECONDS + 60
    )
    answer.raise_for_status()
    seen = answer.json()
    if not seen["idle"]:
        print(
            f"FAILED AI agent: turns still unanswered after {WAIT_SECONDS} s; "
            "is the agent answering? (GET /_sandbox/agent lists every call)",
            file=sys.stderr,
        )
    return seen["calls"]


def answered_conversations(calls: list[dict], settings) -> dict[str, int]:
    """Figures of the sandbox's calls and of the warehouse's `conversation.agent_requests`,
    and two of the answers."""
    with duckdb.connect(str(settings.warehouse_path), read_only=True) as con:
        requests, answered, handovers, orders, routed, assigned = con.execute(
            "SELECT count(*), count(answered_at), count(*) FILTER (handover), "
            "count(*) FILTER (outcome = 'replied' AND NOT handover), "
            "count(*) FILTER (outcome = 'routed'), count(*) FILTER (routing = 'assigned') "
            "FROM conversation.agent_requests"
        ).fetchall()[0]
        examples = con.execute(
            "SELECT m.text, r.reply_text FROM conversation.agent_requests AS r "
            "JOIN conversation.agent_messages AS m ON m.first_request_key = r.request_key "
            "WHERE NOT r.handover AND m.sender_type = 'member' ORDER BY r.received_at LIMIT 2"
        ).fetchall()
    for question, reply in examples:
        print(f"  member: {question!r}\n  agent:  {reply!r}")
    return {
        "sandbox calls": len(calls),
        "sandbox answered": sum(call["answered"] for call in calls),
        "requests": requests,
        "answers": answered,
        "handovers": handovers,
        "order answers": orders,
        "routed to a team": routed,
        "assigned": assigned,
    }


#: An activity as an agency keeps it in its folder; the account is the demo workspace's first
#: Instagram account, known once the sandbox runs.
ACTIVITY = """name = "Winter sale DM"
account_id = "{account}"
trigger = "ig_comment"
keywords = ["price", "link"]
public_replies = ["Sent you a DM!"]

[[dm]]
type = "text"
text = "Here is the winter sale: up to 30% off until the end of December."
"""


def plan_activity(settings) -> int:
    """Write the example activity into the demo's `ACTIVITIES_DIR` and run `activities plan`
    on it: it plans a create, and writes nothing."""
    api = os.environ["COMMENT_AUTOMATION_URL"]
    key = {"Authorization": f"Bearer {os.environ['COMMENT_AUTOMATION_API_KEY']}"}
    accounts = httpx.get(f"{api}/accounts", headers=key, timeout=60).json()["accounts"]
    account = next(a["id"] for a in accounts if a["platform"] == "instagram")
    folder = Path(os.environ["ACTIVITIES_DIR"])
    folder.mkdir(exist_ok=True)
    (folder / "winter-sale-dm.toml").write_text(ACTIVITY.format(account=account))
    return activities.run_command(argparse.Namespace(step="plan"), settings)


def write_settings(data: Path, settings: dict[str, str]) -> Path:
    """The demo's settings as a file a shell sources. Its secrets are left out: the webhook
    receiver's and the agent's are only for the receivers, which stopped with the demo (and
    may be the caller's own); the keys it holds are the sandbox's demo keys, no secret."""
    lines = [
        "# The settings of `make demo` (python -m demo): source this file, then run any command",
        "# on the demo's data. The keys below are the sandbox's own demo keys, not secrets;",
        "# the receivers' secrets (WEBHOOK_SECRET, AGENT_TOKEN) are not written.",
        *(f"export {name}={shlex.quote(value)}" for name, value in sorted(settings.items())),
    ]
    path = data / SETTINGS_FILE
    path.write_text("\n".join(lines) + "\n")
    return path


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m demo")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--data", type=Path, default=Path("data/demo"))
    args = parser.parse_args()
    args.data = args.data.resolve()  # the settings file names it from anywhere
    # Each demo starts a new sandbox, so it starts a new lake too: a ledger of what an
    # earlier sandbox accepted would make this one look up to date.
    shutil.rmtree(args.data, ignore_errors=True)
    args.data.mkdir(parents=True)
    os.environ["LAKE_ROOT"] = str(args.data / "lake")  # the receiver's inbox sits beside it
    # A fresh signing secret per demo, shared through the environment only: never printed,
    # never in a command line.
    os.environ.setdefault("WEBHOOK_SECRET", secrets.token_hex(24))
    # The same for the agent's token; its reply function reads the demo's warehouse.
    os.environ.setdefault("AGENT_TOKEN", secrets.token_hex(24))
    os.environ["AGENT_REPLY"] = "demo.agent:reply"
    os.environ["WAREHOUSE_PATH"] = str(args.data / "warehouse.duckdb")
    receiver_port, agent_port = args.port + 1, args.port + 2
    hook = f"http://127.0.0.1:{receiver_port}/webhooks/datahub"
    agent_url = f"http://127.0.0.1:{agent_port}/agent/reply"
    # The sandbox as `python -m sandbox` starts it again (`restart`), with the receivers the
    # demo runs beside it this time. Its data is anchored at this moment (`--now`), so the
    # sandbox started again later serves the data the demo's lake holds, not data shifted by
    # the time since.
    anchor = datetime.now(UTC).replace(microsecond=0).isoformat()
    restart = ["--frozen", "--now", anchor, "--rate-window", str(RATE_WINDOW_SECONDS)]
    restart += ["--task-phase-seconds", "0.2"]
    sandbox_args = [*restart, "--webhook-url", hook, "--agent-url", agent_url]
    with (
        running_process("pipelines.webhooks", receiver_port),
        running_process("pipelines.agent", agent_port, ready_path="/health"),
        running_sandbox(args.port, *sandbox_args) as base,
    ):
        print(f"sandbox: {base} (frozen, small, seed 7; rate limits per {RATE_WINDOW_SECONDS} s)")
        print(f"webhook receiver: {hook} (the sandbox's data hub signs and sends to it)")
        print(f"AI agent: {agent_url} (demo.agent:reply answers order questions from shop.*)")
        own = point_at_sandbox(base, args.data) | demo.environment()
        own["AGENT_REPLY"] = os.environ["AGENT_REPLY"]
        own["ACTIVITIES_DIR"] = str(args.data / "activities")
        os.environ.update(own)
        settings = load_settings()
        declare_shop(Lake(settings.lake_root))  # the shop's views build before it is written
        # A broadcast goes out first, so its webhook events have a broadcast to join.
        httpx.post(f"{base}/_sandbox/datahub/default/campaigns", timeout=60).raise_for_status()
        print("sync: pulling every stream of the three services into the lake …")
        report = run_sync(settings=settings)
        for step, message in report.failed.items():
            print(f"FAILED {step}: {message}", file=sys.stderr)
        truth = httpx.get(f"{base}/_sandbox/truth", timeout=60).json()
        shop = generate_shop(Lake(settings.lake_root))
        print(f"\ndemo shop (the brand's own system): {sum(shop.values()):,} rows in shop.*")
        print(
            "AI agent: the sandbox's members ask; the agent answers from the shop's orders "
            "while the demo goes on …"
        )
        ask_agent(base)
        print(
            "push: the outbound views (demo/sql/outbound) to the data hub, and assignments "
            "and closes to the conversation service …"
        )
        pushed = run_push_command(dry_run=False, record_types=[])
        print("push again: nothing changed, so nothing is sent …")
        again = run_push_command(dry_run=False, record_types=[])
        print("\nactivities as code: a file for a comment automation, and its plan …")
        planned = plan_activity(settings)
        print("\nreceivers: the data hub's webhooks and the agent's turns into the lake …")
        delivered, complete = delivered_webhooks(base)
        calls = agent_calls(base)
        land(["datahub.webhook_events", "conversation.agent_requests"], settings)
        print("push: the agent's routed handovers (returns to Customer Support) as assignments …")
        routed = run_push_command(dry_run=False, record_types=["conversation_assignment"])
        events = landed_webhooks(settings)
        conversations = answered_conversations(calls, settings)
    rows = reconcile(
        Lake(settings.lake_root), str(settings.warehouse_path), definitions.STREAMS, truth
    )
    width = max(len(r.relation) for r in rows)
    print(f"\n{'relation':<{width}}  {'rows':>9}  {'truth':>9}")
    for r in rows:
        truth_rows = "-" if r.truth is None else f"{r.truth:,}"
        mark = "ok" if r.equal else "DIFFERS"
        print(f"{r.relation:<{width}}  {r.rows:>9,}  {truth_rows:>9}  {mark}")
    print(f"\nwebhook events in datahub.webhook_events: {events}")
    print(f"webhook events the sandbox delivered:      {delivered}")
    print(f"AI agent, in conversation.agent_requests: {conversations}")
    settings_file = write_settings(args.data, own)
    sandbox_command = shlex.join(
        [".venv/bin/python", "-m", "sandbox", "--port", str(args.port), *restart]
    )
    print(
        f"\nlake: {settings.lake_root}/  warehouse: {settings.warehouse_path}\n"
        "Query it read-only (an open session never blocks a sync):\n"
        f"  .venv/bin/python -c \"import duckdb; con = duckdb.connect('{settings.warehouse_path}', "
        "read_only=True); print(con.sql('SELECT * FROM marts.activity_performance LIMIT 5'))\"\n"
        "Open the Dagster UI on the same setup: make dev\n"
        "\nGo on with the demo's data: its sandbox stopped with it; start it again (another "
        "terminal), then source its settings and run any command:\n"
        f"  {sandbox_command}\n"
        f"  . {shlex.quote(str(settings_file))}\n"
        "  .venv/bin/python -m cli check    # or sync, push --dry-run, warehouse\n"
        f"{settings_file}: the sandbox's addresses and its demo keys (not secrets), the lake, the "
        "warehouse and WAREHOUSE_SQL=demo/sql; no secret of the receivers."
    )
    landed = report.ok and all(r.equal for r in rows) and pushed == again == planned == routed == 0
    figures = list(conversations.values())
    answered = figures[0] > 0 and len(set(figures[:4])) == 1  # every call, kept once, answered
    received = complete and events and events == delivered  # every event landed, once
    return 0 if landed and received and answered else 1


if __name__ == "__main__":
    sys.exit(main())
