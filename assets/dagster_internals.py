"""The one module of `assets/` that imports Dagster's private modules (`dagster._...`): each
name below has no public form in Dagster 1.13, and is needed for the reason given beside it.
Every other module uses Dagster's public API (`import dagster as dg`), and
tests/pipelines/test_dagster_api.py fails if one imports a private module, or writes to
Dagster's storage. An upgrade of Dagster reviews this module first.

- `raise_execution_interrupts`, `iterate_with_context`: the Dask executor's mend
  (`assets/executors.py`) repeats dagster-dask's `DaskExecutor.execute` with two changes;
  these two are how Dagster turns a Ctrl-C (a run terminated) into its
  `DagsterExecutionInterruptedError` while the run waits on its steps, through its own
  process-wide record of interrupts, which no public name reaches.
- `AssetCheckEvaluationTargetMaterializationData`: the materialization a check evaluated,
  which `dg.AssetCheckEvaluation` takes. A check of a day-partitioned stream records its
  result once per day of a run over days (`assets/checks.py`, `each_day`); Dagster shows a
  day's result as the day's status only while it names the day's newest materialization,
  as Dagster's own `AssetCheckResult` does for a run of one day.
"""

from dagster._core.definitions.asset_checks.asset_check_evaluation import (
    AssetCheckEvaluationTargetMaterializationData,
)
from dagster._core.errors import raise_execution_interrupts
from dagster._utils import iterate_with_context

__all__ = [
    "AssetCheckEvaluationTargetMaterializationData",
    "iterate_with_context",
    "raise_execution_interrupts",
]
