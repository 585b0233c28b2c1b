"""`python -m pipelines.agent --port P`: serve the AI agent callback with uvicorn, at
`/agent/reply` (give the service that address and the token).

The token comes from `AGENT_TOKEN` only (never an argument, which `ps` would show, and never
logged). The answer is `AGENT_REPLY`'s function, else the default reply
(`pipelines/agent/reply.py`: `AGENT_DEFAULT_REPLY`, `AGENT_REPLY_SECONDS`). The inbox
(`open_agent_inbox`, `pipelines/agent/inbox.py`) is `AGENT_INBOX`, else the deployment's
Postgres where `SYNC_STORE` is set (then replicas on any host may serve one address), else
`agent/inbox.sqlite3` beside `LAKE_ROOT` (default `./data/lake`). Give the receiver the
`LAKE_ROOT` and `WAREHOUSE_PATH` of the runs: the shared inbox is scoped by the one, reply
functions read the other. Nothing a caller sends is logged (`pipelines/serving.py`).
"""

import argparse
import os
import sys

from pipelines.agent.inbox import open_agent_inbox
from pipelines.agent.receiver import AGENT_PATH, TOKEN_VARIABLE, build_app
from pipelines.agent.reply import Replier
from pipelines.errors import SyncError
from pipelines.object_store import checked_root
from pipelines.serving import serve


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipelines.agent", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    args = parser.parse_args(argv)
    token = os.environ.get(TOKEN_VARIABLE)
    if not token:
        parser.error(
            f"{TOKEN_VARIABLE} is not set: it holds the token the conversation service sends "
            "(its AI agent settings)"
        )
    try:
        lake_root = checked_root(os.environ.get("LAKE_ROOT", "data/lake"))
        replier = Replier.from_env(lake_root)
        inbox = open_agent_inbox(lake_root)
    except SyncError as problem:  # a setting (2), the inbox out of reach or damaged (1)
        print(f"agent: {problem}", file=sys.stderr)
        return problem.exit_code
    with inbox:
        answer = "the default reply" if replier.function is None else os.environ["AGENT_REPLY"]
        print(
            f"agent: http://{args.host}:{args.port}{AGENT_PATH}, inbox {inbox.location}, "
            f"answered by {answer} within {replier.deadline:g} s",
            flush=True,
        )
        serve(build_app(inbox, token, replier), args.host, args.port)
        replier.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
