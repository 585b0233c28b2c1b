"""What a process of the product sets for itself, once, where it starts: the command line
(`cli/__main__.py`), the Dagster code location (`assets/definitions.py`), the webhook
receiver and the demo. Not on import: importing a module of the product changes nothing
beyond it."""

import atexit
import functools
import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa

from pipelines import refused


def prepare() -> None:
    """Arrow's memory from malloc, and pyarrow told that pandas is absent. Calling it again
    changes nothing."""
    _arrow_from_malloc()
    _pyarrow_without_pandas()


def _arrow_from_malloc() -> None:
    """Arrow's buffers from malloc, not its default mimalloc pool, which keeps freed pages
    (bench: pull, peak memory), and no slower."""
    pa.set_memory_pool(pa.system_memory_pool())


def _pyarrow_without_pandas() -> None:
    """Tell pyarrow that pandas is not there. On its first conversion of Python values
    (`pa.array`, `Table.from_pylist`, `pa.scalar`, a Python value given to a compute
    function) it imports pandas only to ask whether the values are pandas objects, a large
    import in every process for a question whose answer is no here. It asks on two
    paths, for values of a given type and for values whose type it infers; one conversion
    of the second kind, refused, answers both. What needs pandas for real (`to_pandas`,
    `from_pandas`) still imports it."""
    if "pandas" in sys.modules:
        return
    with refused("pandas"):
        pa.array([0])


@contextmanager
def lasting_imports() -> Iterator[None]:
    """Imports whose objects live as long as the process (Dagster, pyarrow, the services'
    models): collected while they are made, they were walked again and again (bench: peer,
    push). The cyclic collector waits until they are made, then leaves them out of every
    later collection (`gc.freeze`); the process's own garbage is collected as usual. For
    the command line's start and for what one of its commands imports only when it runs
    (Dagster, for a push)."""
    with collector_paused():
        try:
            yield
        finally:
            gc.freeze()
            _unfrozen_at_exit()


@functools.cache
def _unfrozen_at_exit() -> None:
    """Frozen objects are never freed by the interpreter's teardown: DuckDB's bindings
    (nanobind) then report each of theirs still alive as a leak, dozens of lines after the
    process's own last one. Given back at exit, the teardown frees them with the rest."""
    atexit.register(gc.unfreeze)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Work that makes many objects that outlive it and few reference cycles (imports, the
    push's plan of tens of thousands of rows). The cyclic collector runs every few hundred
    new objects and walks the young ones, and now and then every one alive, again and again
    while they pile up (bench: push). Paused, it walks them once, when it resumes. Garbage
    is still freed at once by its reference counts; only cycles wait for the collector."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
