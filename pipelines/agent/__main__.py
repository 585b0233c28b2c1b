"""`python -m pipelines.agent --port P`: serve the AI agent callback with uvicorn, at
`/agent/reply` (give the service that address and the token).

The token comes from `AGENT_TOKEN` only (never an argument, which `ps` would show, and never
logged). The answer is `AGENT_REPLY`'s function, else the default reply
(`pipelines/agent/reply.py`: `AGENT_DEFAULT_REPLY`, `AGENT_REPLY_SECONDS`). The inbox
(`open_agent_inbox`, `pipelines/agent/inbox.py`) is `AGENT_INBOX`, else the deployment's
Postgres where `SYNC_STORE` is set (then replicas on any host may serve one address), else
`agent/inbox.sqlite3` beside `LAKE_ROOT` (default `./data/lake`). Give the receiver the
`LAKE_ROOT` and `WAREHOUSE_PATH` of the runs: the shared inbox is scoped by the one, reply
functions read the other. Nothing a caller sends is logged (`pipelines/inbox/serving.py`); the
plumbing is `pipelines/inbox/receiver.py`'s.
"""

import os
import sys

from pipelines.agent.inbox import open_agent_inbox
from pipelines.agent.receiver import AGENT_PATH, TOKEN_VARIABLE, build_app
from pipelines.agent.reply import Replier
from pipelines.inbox import receiver

TOKEN_IS = "it holds the token the conversation service sends (its AI agent settings)"


def start(lake_root: str, token: str) -> receiver.Receiver:
    """The agent on the lake at `lake_root`: its reply function, inbox and app."""
    replier = Replier.from_env(lake_root)
    inbox = open_agent_inbox(lake_root)
    answer = "the default reply" if replier.function is None else os.environ["AGENT_REPLY"]
    return receiver.Receiver(
        inbox,
        build_app(inbox, token, replier),
        f", answered by {answer} within {replier.deadline:g} s",
        replier.close,
    )


COMMAND = receiver.Command(
    "python -m pipelines.agent", "agent", AGENT_PATH, TOKEN_VARIABLE, TOKEN_IS
)


if __name__ == "__main__":
    sys.exit(receiver.main(None, COMMAND, __doc__, start))
