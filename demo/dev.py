"""`make dev`: the Dagster UI on the demo's setup, against a live sandbox (its clock moves,
so new trigger logs, messages and member changes keep arriving for the schedules), with the
demo's SQL in the warehouse (`WAREHOUSE_SQL=demo/sql`), the demo's shop written to the lake
at each start (`demo/shop.py`: what the push sends, its broken rows rejected) and both
receivers beside it: the webhook receiver (`python -m pipelines.webhooks`, port + 1), which
the sandbox's data hub signs and sends its events to, and the AI agent (`python -m
pipelines.agent`, port + 2, `AGENT_REPLY=demo.agent:reply`), which its conversation service
calls for each live member message. The sensors of `assets/webhooks.py` and
`assets/agent.py` land what they store. `python -m demo.dev`.

Everything it starts lives under `--data` (default `data/dev/`): the lake, the warehouse, the
Dagster instance (`DAGSTER_HOME=<data>/dagster`, its settings copied from
`instance/dagster.yaml`) and each server's log (`logs/`). The receivers' secrets are new each
start (unless `WEBHOOK_SECRET`, `AGENT_TOKEN` are set) and only ever in the environment.

Dagster (`dg dev`: its webserver, daemon and code server) runs in a session of its own, so a
Ctrl-C reaches it once, from here: it is asked to stop, the sandbox and the receivers are
stopped meanwhile, and whatever of Dagster's process group is left `DAGSTER_GRACE_SECONDS`
later is killed: everything is gone within 10 s of a Ctrl-C, a SIGTERM or a hang-up."""

import argparse
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from pathlib import Path

import httpx

import demo
from demo.shop import generate_shop
from pipelines.agent.receiver import AGENT_PATH
from pipelines.lake import Lake
from pipelines.webhooks.receiver import WEBHOOK_PATH
from sandbox.process import RATE_WINDOW_SECONDS, point_at_sandbox, running_process, running_sandbox

ROOT = Path(__file__).resolve().parent.parent
#: The instance settings (pools, the `pipelines` logger in the event log) the UI runs with.
INSTANCE_SETTINGS = ROOT / "instance" / "dagster.yaml"
#: Signals that stop `make dev`: a Ctrl-C, a `kill`, the terminal closing.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
#: How long Dagster gets to stop by itself (5 s on 2 idle cores, more on busy ones) before what is
#: left of it is killed; the sandbox and the receivers stop meanwhile, within a second or two.
DAGSTER_GRACE_SECONDS = 6.0


def stop_requested(signum: int, frame: object) -> None:
    """The first stop signal interrupts whatever runs; later ones are ignored, so the stop
    itself is never cut short and nothing is left running."""
    for stop in STOP_SIGNALS:
        signal.signal(stop, signal.SIG_IGN)
    raise KeyboardInterrupt


class Dagster:
    """`command` (`dg dev`) in a session of its own: a Ctrl-C in the terminal never reaches
    its processes, only `ask_to_stop`'s one SIGINT, so it stops the way it is built to. What
    is left of its process group `DAGSTER_GRACE_SECONDS` after that is killed (`stop`)."""

    def __init__(self, command: list[str]) -> None:
        self.process = subprocess.Popen(command, start_new_session=True)
        self.deadline = float("inf")

    def ask_to_stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
        self.deadline = time.monotonic() + DAGSTER_GRACE_SECONDS

    def stop(self) -> None:
        if self.deadline == float("inf"):
            self.ask_to_stop()
        while self.group_alive() and time.monotonic() < self.deadline:
            self.process.poll()  # reaps it once it exits, so its group can empty
            time.sleep(0.1)
        if self.group_alive():
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()

    def group_alive(self) -> bool:
        try:
            os.killpg(self.process.pid, 0)
        except ProcessLookupError:
            return False
        return True


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m demo.dev")
    parser.add_argument(
        "--port", type=int, default=8765, help="the sandbox's; the receivers take the next two"
    )
    parser.add_argument("--ui-port", type=int, default=3000)
    parser.add_argument("--data", type=Path, default=Path("data/dev"))
    args = parser.parse_args()
    for stop in STOP_SIGNALS:
        signal.signal(stop, stop_requested)
    try:
        return serve(args.port, args.ui_port, args.data.resolve())
    except KeyboardInterrupt:
        return 0


def serve(port: int, ui_port: int, data: Path) -> int:
    """Start everything, serve until Dagster ends or a stop signal comes, stop everything."""
    home, logs = data / "dagster", data / "logs"
    for folder in (home, logs):
        folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(INSTANCE_SETTINGS, home / "dagster.yaml")
    base = f"http://127.0.0.1:{port}"
    hook = f"http://127.0.0.1:{port + 1}{WEBHOOK_PATH}"
    agent_url = f"http://127.0.0.1:{port + 2}{AGENT_PATH}"
    # Every process started here reads the same settings: the receivers the lake's and the
    # warehouse's, Dagster's runs the receivers' (its setup check finds them set).
    os.environ.update(point_at_sandbox(base, data) | demo.environment())
    os.environ["DAGSTER_HOME"] = str(home)
    os.environ["AGENT_REPLY"] = "demo.agent:reply"
    # urllib3 warns, on import, of an optional dependency (SOCKS) no part of the product
    # uses; at its warning level Dagster's services would show it as theirs. By its message:
    # a filter naming urllib3's class is refused before urllib3 can be imported.
    os.environ.setdefault("PYTHONWARNINGS", "ignore:SOCKS support in urllib3")
    os.environ.setdefault("WEBHOOK_SECRET", secrets.token_hex(24))
    os.environ.setdefault("AGENT_TOKEN", secrets.token_hex(24))
    # The shop's tables with their rows (its customers from the members a sync pulled
    # earlier, else its own), so a push from the UI sends rows and rejects the broken ones.
    generate_shop(Lake(os.environ["LAKE_ROOT"]))
    sandbox_args = ["--rate-window", str(RATE_WINDOW_SECONDS)]
    sandbox_args += ["--webhook-url", hook, "--agent-url", agent_url]
    with ExitStack() as running:
        try:
            running.enter_context(
                running_process("pipelines.webhooks", port + 1, log=logs / "webhooks.log")
            )
            running.enter_context(
                running_process(
                    "pipelines.agent", port + 2, ready_path="/health", log=logs / "agent.log"
                )
            )
            running.enter_context(running_sandbox(port, *sandbox_args, log=logs / "sandbox.log"))
        except (RuntimeError, TimeoutError) as problem:  # a port taken, most likely
            failed = str(problem).splitlines()[0].rstrip(":")
            print(
                f"make dev: {failed}; its output is in {logs}/ (a port in use? --port "
                f"{port} takes it and the next two)",
                file=sys.stderr,
            )
            return 1
        # A broadcast at once, so the webhook inbox holds its events from the start; the
        # hub's live member changes follow as it is asked (its assets, its schedule).
        campaign = httpx.post(f"{base}/_sandbox/datahub/default/campaigns", timeout=60)
        campaign.raise_for_status()
        print(
            f"sandbox: {base} (live)\n"
            f"webhook receiver: {hook} (the sandbox's data hub signs and sends to it)\n"
            f"AI agent: {agent_url} (the sandbox's members ask; demo.agent:reply answers)\n"
            f"Dagster instance: {home}; lake: {os.environ['LAKE_ROOT']}; logs: {logs}/\n"
            f"Dagster UI: http://127.0.0.1:{ui_port}  (Ctrl-C stops everything)",
            flush=True,
        )
        workspace = str(ROOT / "workspace.yaml")
        # Dagster's services say their warnings and errors, not each poll of the sensors
        # and schedules (hundreds of lines an hour among the product's own).
        command = [sys.executable, "-m", "dagster_dg_cli.cli", "dev", "-w", workspace]
        command += ["--log-level", "warning"]
        dagster = Dagster([*command, "-p", str(ui_port)])
        try:
            # Asked first, so it stops while the sandbox and the receivers stop.
            running.callback(dagster.ask_to_stop)
            return dagster.process.wait()
        finally:
            running.close()
            dagster.stop()


if __name__ == "__main__":
    sys.exit(main())
