"""`python -m bench.in_dagster WHAT OUT …`: a bare floor (`bench/bare.py`, the same
arguments) run as the body of one Dagster asset, materialized in this process on a throwaway
instance as `python -m cli sync` materializes its assets where `DAGSTER_HOME` is set
(without it, the sync runs no Dagster run at all): what Dagster itself adds to a pull, with
nothing of the product's in the process.

Dagster is used as the pipeline's Dagster runs use it (`assets/sync.py`, `in_dagster`), so
that the figure is the part of such a run's time that no change of ours can remove:

- a daily work (trigger logs `--days D`, the message backup) is a daily-partitioned asset
  materialized over the same D days in one run, a materialization recorded per day, as the
  pipeline's single-run backfills are; the other works are one unpartitioned asset;
- the console logs at `SYNC_LOG_LEVEL` (the benchmark's: WARNING), results stay in memory (no
  IO manager's files), and the planned materializations of a range are one event
  (`PLANNED_AS_ONE_EVENT`, below);
- the process starts and ends as the product's command does (`cli/__main__.py`): the
  cyclic collector held off while the imports run, then their objects frozen out of it, and
  the process ended after its exit handlers, without the interpreter's teardown.

It has none of the pipeline's work around the fetch: no parsing, no Parquet, no checks, no
warehouse. A pipeline figure over this one is ours to cut; this one over the bare floor is
Dagster's.
"""

import atexit
import gc
import json
import os
import sys
import warnings
from datetime import UTC, datetime, timedelta

#: The exit status once `main` has returned one.
returned: int | None = None


def _end_without_teardown() -> None:
    """The last exit handler (registered first), as in `cli/__main__.py`."""
    if returned is not None:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(returned)


atexit.register(_end_without_teardown)
gc.disable()
import dagster as dg  # noqa: E402
from dagster._core.storage.tags import (  # noqa: E402
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
)

from bench import bare  # noqa: E402

gc.freeze()
gc.enable()
warnings.filterwarnings("ignore", category=dg.BetaWarning)  # as `assets/__init__.py`

#: Dagster's switch for one "materialization planned" event per run, not one per partition:
#: the floor is Dagster at its cheapest.
PLANNED_AS_ONE_EVENT = "DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS"
#: The floors whose days are daily partitions in the pipeline.
DAILY = {"trigger_logs", "messages_backup"}


def floor_asset(fetch, days: int | None) -> tuple[dg.AssetsDefinition, dict[str, str]]:
    """The asset whose body is the floor, and the tags of its run: the last `days` days
    through today (UTC) when it is daily."""
    if days is None:
        partitions, tags = None, {}
    else:
        today = datetime.now(UTC).date()
        first = today - timedelta(days=days - 1)
        partitions = dg.DailyPartitionsDefinition(
            start_date=first.isoformat(), end_offset=1, timezone="UTC"
        )
        tags = {
            ASSET_PARTITION_RANGE_START_TAG: first.isoformat(),
            ASSET_PARTITION_RANGE_END_TAG: today.isoformat(),
        }

    @dg.asset(
        partitions_def=partitions,
        backfill_policy=dg.BackfillPolicy.single_run() if partitions else None,
    )
    def floor() -> dg.MaterializeResult:
        fetch()
        return dg.MaterializeResult()

    return floor, tags


def main(argv: list[str] | None = None) -> int:
    args = bare.parser("python -m bench.in_dagster", __doc__).parse_args(argv)

    def fetch() -> None:
        args.out.write_text(json.dumps(bare.fetch(args)))

    asset, tags = floor_asset(fetch, args.days if args.what in DAILY else None)
    os.environ[PLANNED_AS_ONE_EVENT] = "true"
    level = os.environ.get("SYNC_LOG_LEVEL", "INFO").upper()
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize(
            [asset],
            instance=instance,
            resources={"io_manager": dg.mem_io_manager},
            run_config={"loggers": {"console": {"config": {"log_level": level}}}},
            tags=tags,
            raise_on_error=False,
        )
    return 0 if result.success else 1


if __name__ == "__main__":
    returned = main()
    sys.exit(returned)
