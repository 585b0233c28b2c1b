"""`python -m bench.measure OUT MODULE [ARGS…]`: run a module as `python -m` would, then write
its peak resident memory to OUT. Its wall time is the caller's to measure, from start to exit
(`bench/common.py`)."""

import json
import runpy
import sys
from pathlib import Path


def peak_rss_mb() -> float:
    """This process's high-water mark of resident memory. Not `ru_maxrss`: Linux carries the
    parent's figure over into a child across fork and exec."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024  # kB
    raise RuntimeError("no VmHWM in /proc/self/status (Linux only)")


def main() -> None:
    out, module, *args = sys.argv[1:]
    sys.argv = [module, *args]
    code = 0
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        Path(out).write_text(json.dumps({"peak_rss_mb": peak_rss_mb()}))
    sys.exit(code)


if __name__ == "__main__":
    main()
