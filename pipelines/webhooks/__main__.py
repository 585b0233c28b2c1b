"""`python -m pipelines.webhooks --port P`: serve the webhook receiver with uvicorn.

The signing secret comes from `WEBHOOK_SECRET` only (never an argument, which `ps` would
show, and never logged). The inbox (`open_inbox`, `pipelines/webhooks/inbox.py`) is
`WEBHOOK_INBOX`, else the deployment's Postgres where `SYNC_STORE` is set (then replicas on
any host may serve one address), else `webhooks/inbox.sqlite3` in the data directory beside
`LAKE_ROOT` (default `./data/lake`). Give the receiver the `LAKE_ROOT` of the runs that
compact its inbox: a shared inbox is scoped by it. Nothing a caller sends is logged
(`pipelines/inbox/serving.py`); the plumbing is `pipelines/inbox/receiver.py`'s.
"""

import sys

from pipelines.inbox import receiver
from pipelines.webhooks.inbox import open_inbox
from pipelines.webhooks.receiver import SECRET_VARIABLE, WEBHOOK_PATH, build_app

SECRET_IS = "it holds the data hub's signing secret"


def start(lake_root: str, secret: str) -> receiver.Receiver:
    """The webhook receiver on the lake at `lake_root`: its inbox and app."""
    inbox = open_inbox(lake_root)
    return receiver.Receiver(inbox, build_app(inbox, secret))


COMMAND = receiver.Command(
    "python -m pipelines.webhooks", "webhook receiver", WEBHOOK_PATH, SECRET_VARIABLE, SECRET_IS
)


if __name__ == "__main__":
    sys.exit(receiver.main(None, COMMAND, __doc__, start))
