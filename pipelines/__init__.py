"""The core: transport, paging, clients and streams of each service, the lake, the warehouse,
the push and the webhook receiver. Nothing here imports Dagster, `assets/` (the Dagster
layer built on it) or `cli/` (the command line, beside it)."""

import sys
from collections.abc import Iterator
from contextlib import contextmanager


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
