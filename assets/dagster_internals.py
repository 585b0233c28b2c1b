"""Names of Dagster's private modules (`dagster._...`) the Dagster layer needs: each has no
public form in Dagster 1.13, and is needed for the reason given beside it. An upgrade of
Dagster reviews this module first.

- `raise_execution_interrupts`, `iterate_with_context`: the Dask executor's mend
  (`assets/executors.py`) repeats dagster-dask's `DaskExecutor.execute` with two changes;
  these two are how Dagster turns a Ctrl-C (a run terminated) into its
  `DagsterExecutionInterruptedError` while the run waits on its steps, through its own
  process-wide record of interrupts, which no public name reaches.
"""

from dagster._core.errors import raise_execution_interrupts
from dagster._utils import iterate_with_context

__all__ = ["iterate_with_context", "raise_execution_interrupts"]
