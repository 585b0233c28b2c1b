"""`python -m bench.clocked CLOCK MODULE [ARGS…]`: run a module as `python -m` would, on the
sandbox's clock instead of the wall's. The product takes "today" and "now" from the wall
clock (`pipelines/pull/landing.py`), so a bench that moves the sandbox's clock a year ahead
(bench/year.py) runs each command on it.

CLOCK is a moment (ISO 8601 with its offset), from which the process's clock ticks with the
wall; or a file holding one, which the process follows for as long as it runs: whenever the
file changes, its clock moves to what the file says (the receivers, which serve for the whole
simulated year). Only Python's clock moves (`time_machine`): Arrow's and DuckDB's native code
keep the wall's, as do the files' times.

Light on purpose: it imports nothing but the standard library and time_machine before the
module, so the command's figures are the command's.
"""

import runpy
import sys
import threading
import time
from datetime import datetime
from pathlib import Path

import time_machine

#: How often a followed file is looked at (a `stat`): the bench writes it once per move.
FOLLOW_SECONDS = 0.2


def moment_in(path: Path) -> datetime:
    return datetime.fromisoformat(path.read_text().strip())


def follow(path: Path, coordinates) -> None:
    """Move the clock to the file's moment each time the file changes."""
    seen = path.stat().st_mtime_ns
    while True:
        time.sleep(FOLLOW_SECONDS)
        changed = path.stat().st_mtime_ns
        if changed != seen:
            seen = changed
            coordinates.move_to(moment_in(path))


def main() -> None:
    clock, module, *args = sys.argv[1:]
    path = Path(clock)
    followed = not clock[:4].isdigit() and path.exists()
    moment = moment_in(path) if followed else datetime.fromisoformat(clock)
    traveller = time_machine.travel(moment, tick=True)
    coordinates = traveller.start()
    if followed:
        threading.Thread(target=follow, args=(path, coordinates), daemon=True).start()
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
