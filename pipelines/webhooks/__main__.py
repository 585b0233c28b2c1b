"""`python -m pipelines.webhooks --port P`: serve the webhook receiver with uvicorn.

The signing secret comes from `WEBHOOK_SECRET` only (never an argument, which `ps` would
show, and never logged). The inbox (`open_inbox`, `pipelines/webhooks/inbox.py`) is
`WEBHOOK_INBOX`, else the deployment's Postgres where `SYNC_STORE` is set (then replicas on
any host may serve one address), else `webhooks/inbox.sqlite3` in the data directory beside
`LAKE_ROOT` (default `./data/lake`). Give the receiver the `LAKE_ROOT` of the runs that
compact its inbox: a shared inbox is scoped by it. Nothing a caller sends is logged
(`pipelines/serving.py`).
"""

import argparse
import os
import sys

from pipelines.errors import SyncError
from pipelines.object_store import checked_root
from pipelines.serving import serve
from pipelines.webhooks.inbox import open_inbox
from pipelines.webhooks.receiver import SECRET_VARIABLE, WEBHOOK_PATH, build_app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipelines.webhooks", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    args = parser.parse_args(argv)
    secret = os.environ.get(SECRET_VARIABLE)
    if not secret:
        parser.error(f"{SECRET_VARIABLE} is not set: it holds the data hub's signing secret")
    try:
        # Written as the settings write it (`pipelines/settings.py`): the shared inbox's scope.
        inbox = open_inbox(checked_root(os.environ.get("LAKE_ROOT", "data/lake")))
    except SyncError as problem:  # a setting (2), the inbox out of reach or damaged (1)
        print(f"webhook receiver: {problem}", file=sys.stderr)
        return problem.exit_code
    with inbox:
        print(
            f"webhook receiver: http://{args.host}:{args.port}{WEBHOOK_PATH}, "
            f"inbox {inbox.location}",
            flush=True,
        )
        serve(build_app(inbox, secret), args.host, args.port)
    return 0


if __name__ == "__main__":
    sys.exit(main())
