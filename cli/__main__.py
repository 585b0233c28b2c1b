"""`python -m cli …`: the command line (`cli/main.py`), which runs the core, or the UI's
Dagster assets where `DAGSTER_HOME` keeps an instance. Nothing imports this launcher.

Every scheduled sync pays the command's start and end, so three things here only make them
cheaper (a fourth, below, its peak memory: Arrow's allocator):

- The imports (Dagster, pyarrow, the services' models) make objects that live as long as
  the process. Collected while they are made, they were walked again and again
  (bench: peer). The collector waits until they are made, then leaves them out of every
  later collection (`process.lasting_imports`); the run's own garbage is collected as usual.
  A command that imports more when it runs (Dagster, for a push) does the same there.
- httpx and httpcore import two optional modules the command never uses: httpcore's async
  locks (anyio) and httpx's own command line (with pygments and click). They are
  refused while those two load (`pipelines.refused`); the command makes no async request.
- Once the command has returned its exit status, and the interpreter has run what it runs
  at exit (it waits for threads, then calls every exit handler: logging's, the removal of
  temporary directories, Dagster's), the process ends without the interpreter's teardown.
  That teardown freed every module's objects one by one and collected their cycles, for
  memory the system takes back at once (bench: peer). A command that raised ends the usual
  way.

A reader that stops reading what the command prints (`| head`) ends it with status 1 and no
traceback.
"""

import atexit
import os
import sys

# Arrow's own allocations (the Parquet reader's, the file reads') come from the pool this
# names, chosen once when pyarrow is imported: malloc rather than mimalloc, which keeps the
# pages a year's landing frees (bench: pull, peak memory). Inherited by the processes the
# command starts; `process.prepare` sets the same for what Python asks Arrow for.
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")

from pipelines import process, refused  # noqa: E402

#: The command's exit status once it has returned one.
returned: int | None = None


def _end_without_teardown() -> None:
    """The last exit handler (registered first): once the command has returned, flush what
    it printed and end the process here."""
    if returned is None:
        return
    status = returned
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # the reader went away, as below
            status = status or 1
    os._exit(status)


atexit.register(_end_without_teardown)
with process.lasting_imports():
    process.prepare()
    with refused("anyio", "httpx._main"):
        import httpcore  # noqa: F401
        import httpx  # noqa: F401
    from cli.main import main
try:
    returned = main()
except BrokenPipeError:
    returned = 1  # the reader of what it prints went away (`| head`): nothing more to say
sys.exit(returned)
