"""The core: transport, paging, clients and streams of each service, the lake, the warehouse,
the push and the webhook receiver. Nothing here imports Dagster or `assets/` (the Dagster
layer built on it), except the command line's launcher `pipelines/__main__.py`."""

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pyarrow as pa


@contextmanager
def refused(*names: str) -> Iterator[None]:
    """Within the block, importing any of the modules `names` fails as if it were not
    installed: for a library that imports an optional module it does without, when that
    module costs more than it gives. Outside the block they import as usual."""

    class Refuse:
        @staticmethod
        def find_spec(name, path=None, target=None):
            if name in names:
                raise ModuleNotFoundError(f"{name} held back ({__name__}.refused)")

    sys.meta_path.insert(0, Refuse)
    try:
        yield
    finally:
        sys.meta_path.remove(Refuse)


def _pyarrow_without_pandas() -> None:
    """Tell pyarrow that pandas is not there. On its first conversion of Python values
    (`pa.array`, `Table.from_pylist`, `pa.scalar`, a Python value given to a compute
    function) it imports pandas only to ask whether the values are pandas objects: 55 MB and
    0.3 s of CPU in every process, for a question whose answer is no here. It asks on two
    paths, for values of a given type and for values whose type it infers; one conversion
    of the second kind, refused, answers both. What needs pandas for real (`to_pandas`,
    `from_pandas`) still imports it."""
    if "pandas" in sys.modules:
        return
    with refused("pandas"):
        pa.array([0])


_pyarrow_without_pandas()
