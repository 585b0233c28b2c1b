"""`python -m sandbox --port P [--seed N] [--scale small|medium|large] [--frozen] …`"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime

import uvicorn

from sandbox.app import build_app
from sandbox.config import HISTORY_DAYS, SCALES, SandboxConfig
from sandbox.context import APIKEYS, COMMENT_KEYS, MOUNTS
from sandbox.drift import DriftSpec
from sandbox.faults import FaultSpec


def _aware(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:
        raise argparse.ArgumentTypeError("needs a timezone, e.g. 2026-11-01T00:00:00+00:00")
    return moment


def _at_least_one(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a whole number of at least 1, not {text!r}")
    return int(text)


def _faults(text: str) -> FaultSpec:
    try:
        return FaultSpec.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


DRIFT_HELP = """\
drift: --drift takes comma-separated <stream>:<kind>=<arguments>; streams as the pipeline
names them (comment.trigger_logs, comment.activities, conversation.channels,
conversation.messages, datahub.custom_fields, datahub.members, ...):
  add=<field>:<number|string|object>       a new field, its value derived from the item's id
  nest=<object field>.<field>:<type>       a new field inside an object field (JSON streams)
  rename=<field>><new name>                the old name disappears, the new carries the value
  retype=<field>:<string|null>             the value served as text (CSV: '12) or as null
  remove=<field>                           the field (CSV: the column) disappears
Answers served once the data clock is at or after --drift-from drift; GET /_sandbox/drift
counts them. Example:
  --drift 'comment.activities:nest=stats.shares:number,datahub.members:remove=city' \\
  --drift-from 2026-11-01T12:00:00+00:00
"""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m sandbox",
        description=__doc__,
        epilog=DRIFT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--scale", choices=sorted(SCALES), default="small")
    parser.add_argument(
        "--frozen",
        action="store_true",
        help="stop the clock at start: no new traffic, exact comparisons",
    )
    parser.add_argument("--now", type=_aware, help="anchor the data before this moment")
    parser.add_argument(
        "--faults",
        type=_faults,
        default=FaultSpec(),
        help="e.g. error=0.05,rate=0.02,burst=3,slow=0.01,drop=0.01,truncate=0.01",
    )
    parser.add_argument(
        "--drift",
        metavar="SPEC",
        help="streams that change shape, e.g. comment.trigger_logs:add=channel_tag:number "
        "(see below)",
    )
    parser.add_argument(
        "--drift-from",
        type=_aware,
        metavar="MOMENT",
        help="data time the drift starts at (default: from the start), e.g. "
        "2026-10-01T00:00:00+00:00",
    )
    parser.add_argument("--webhook-url")
    parser.add_argument("--webhook-secret", help="HMAC secret; WEBHOOK_SECRET is read if unset")
    parser.add_argument(
        "--webhook-concurrency",
        type=_at_least_one,
        default=SandboxConfig.webhook_concurrency,
        metavar="N",
        help="webhook deliveries in flight at once (default %(default)s; 1: strictly in order)",
    )
    parser.add_argument(
        "--agent-url",
        help="the brand's AI agent: each live member message is sent to it "
        "(default region version 1.1, jp 1.0)",
    )
    parser.add_argument(
        "--agent-token", help="the agent's bearer token; AGENT_TOKEN is read if unset"
    )
    parser.add_argument("--no-rate-limits", action="store_true")
    parser.add_argument(
        "--rate-window",
        type=float,
        default=60.0,
        help="seconds the documented per-minute limits apply to (benchmarks)",
    )
    parser.add_argument(
        "--arrivals-per-minute",
        type=float,
        default=30.0,
        help="new rows per minute per live stream when not frozen",
    )
    parser.add_argument(
        "--campaign-minutes",
        type=float,
        default=30.0,
        help="minutes of data time between live data hub campaigns when not frozen (0: none)",
    )
    parser.add_argument("--task-phase-seconds", type=float, default=1.0)
    parser.add_argument(
        "--history-days",
        type=int,
        choices=range(2, HISTORY_DAYS + 1),
        default=HISTORY_DAYS,
        metavar=f"{{2..{HISTORY_DAYS}}}",
        help="days before the anchor that hold the history's trigger logs, messages and "
        "broadcasts (the older days of the services' windows stay empty)",
    )
    args = parser.parse_args(argv)
    try:
        args.drift = DriftSpec.parse(args.drift, args.drift_from)
    except ValueError as exc:
        parser.error(f"argument --drift: {exc}")
    args.webhook_secret = args.webhook_secret or os.environ.get("WEBHOOK_SECRET")
    if bool(args.webhook_url) != bool(args.webhook_secret):
        parser.error("--webhook-url and a secret (--webhook-secret or WEBHOOK_SECRET) go together")
    args.agent_token = args.agent_token or os.environ.get("AGENT_TOKEN")
    if bool(args.agent_url) != bool(args.agent_token):
        parser.error("--agent-url and a token (--agent-token or AGENT_TOKEN) go together")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    config = SandboxConfig(
        seed=args.seed,
        scale=args.scale,
        frozen=args.frozen,
        now=args.now,
        history_days=args.history_days,
        faults=args.faults,
        drift=args.drift,
        webhook_url=args.webhook_url,
        webhook_secret=args.webhook_secret,
        webhook_concurrency=args.webhook_concurrency,
        agent_url=args.agent_url,
        agent_token=args.agent_token,
        rate_limits=not args.no_rate_limits,
        rate_window_seconds=args.rate_window,
        arrivals_per_minute=args.arrivals_per_minute,
        campaign_minutes=args.campaign_minutes,
        task_phase_seconds=args.task_phase_seconds,
        public_url=f"http://{args.host}:{args.port}",
    )
    app = build_app(config)
    base = config.public_url
    print(
        f"sandbox (seed {config.seed}, scale {config.scale}, "
        f"{'frozen' if config.frozen else 'live'}) at {base}",
        file=sys.stderr,
    )
    for (service, region), mount in MOUNTS.items():
        print(
            f"  {service:<13} {region:<8} {base}{mount}  (OpenAPI: {mount}/openapi.json)",
            file=sys.stderr,
        )
    print(f"  ground truth           {base}/_sandbox/truth", file=sys.stderr)
    if config.agent_url:
        versions = ", ".join(f"{r} {v}" for r, v in config.agent_versions.items())
        print(f"  AI agent called at     {config.agent_url} ({versions})", file=sys.stderr)
    for key, (workspace, scope) in COMMENT_KEYS.items():
        print(
            f"  comment automation key {key} (workspace {workspace}, scope {scope})",
            file=sys.stderr,
        )
    for key in sorted(APIKEYS):
        print(f"  conversation and data hub key {key}", file=sys.stderr)
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
