"""The core: transport, paging, clients and streams of each service, the lake, the warehouse,
the push and the webhook receiver. Nothing here imports Dagster or `assets/` (the Dagster
layer built on it), except the command line's launcher `pipelines/__main__.py`."""

import sys

import pyarrow as pa


class _NoPandas:
    """A module finder that refuses pandas."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "pandas":
            raise ModuleNotFoundError("pandas held back from pyarrow's first conversion")


def _pyarrow_without_pandas() -> None:
    """Tell pyarrow that pandas is not there. On its first conversion of Python values
    (`pa.array`, `Table.from_pylist`, `pa.scalar`) it imports pandas only to ask whether the
    values are pandas objects: 55 MB and 0.3 s of CPU in every process, for a question whose
    answer is no here. pyarrow asks once; what needs pandas for real (`to_pandas`,
    `from_pandas`) still imports it."""
    if "pandas" in sys.modules:
        return
    sys.meta_path.insert(0, _NoPandas)
    try:
        pa.array([], pa.null())
    finally:
        sys.meta_path.remove(_NoPandas)


_pyarrow_without_pandas()
