"""`python -m pipelines …`: the command line (`assets/cli.py`). This launcher is the one file
of `pipelines/` that reaches the Dagster layer: nothing imports it, it only starts the
command, whose runs go through the same Dagster assets and jobs as the UI's.

Every scheduled sync pays the command's start, so two things here only make it cheaper:

- The imports (Dagster, pyarrow, the services' models) make objects that live as long as
  the process. Collected while they are made, they were walked again and again, a sixth of
  a one-request sync's time (bench: peer): the collector waits until they are made, then
  leaves them out of every later collection (`gc.freeze`); the run's own garbage is
  collected as usual.
- httpx and httpcore import two optional modules the command never uses: httpcore's async
  locks (anyio, 0.1 s) and httpx's own command line (with pygments and click). They are
  refused while those two load (`pipelines.refused`); the command makes no async request.
"""

import gc
import sys

from pipelines import refused

gc.disable()
with refused("anyio", "httpx._main"):
    import httpcore  # noqa: F401
    import httpx  # noqa: F401
from assets.cli import main  # noqa: E402

gc.freeze()
gc.enable()
try:
    code = main()
finally:
    # Given back at exit, for the interpreter's teardown to free them with the rest: DuckDB's
    # bindings report each of their objects still alive then as a leak.
    gc.unfreeze()
sys.exit(code)
