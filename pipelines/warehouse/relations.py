"""The one way to bring the warehouse's views up to date (every relation it shows: the
streams of `pipelines/registry.py`)."""

from collections.abc import Iterable, Sequence
from pathlib import Path

import duckdb

from pipelines.activities import state as activities_state
from pipelines.activities.state import CHANGES as ACTIVITY_CHANGES
from pipelines.errors import first_line
from pipelines.lake import Lake
from pipelines.lake.object_store import disk_refusal, lake_fault
from pipelines.pull.damaged import (
    LANDED_AGAIN,
    SetAside,
    lands_again,
    set_aside,
    set_aside_damaged,
    unreadable,
)
from pipelines.registry import PULLED, WAREHOUSE_STREAMS
from pipelines.streams import pushed
from pipelines.warehouse import Warehouse, WarehouseUnavailable, Written
from pipelines.warehouse.closed_days import DamagedCopy


def warehouse_of(
    lake_root: str | Path, warehouse_path: str | Path, extra_sql: Sequence[str | Path]
) -> Warehouse:
    """The warehouse every build uses. `extra_sql`: the `WAREHOUSE_SQL` folders
    (`Settings.warehouse_sql`, `LakeResource.warehouse_sql`), required so that no build
    leaves them out."""
    return Warehouse(
        warehouse_path, Lake(lake_root), WAREHOUSE_STREAMS, extra_sql=extra_sql, viewed=PULLED
    )


def refresh_warehouse(
    lake_root: str | Path,
    warehouse_path: str | Path,
    extra_sql: Sequence[str | Path],
    written: Iterable[Written] | None = None,
) -> str:
    """Bring the views up to date and say what happened. `written`: what a landing wrote,
    where the caller knows it (nothing else is looked at when the views show it already;
    `Warehouse.refresh`). Sessions open on the file do not
    stop it (pipelines/warehouse/__init__.py); when it truly cannot be done, `WarehouseBusy` (a
    session's unsaved changes) or `WarehouseUnavailable` (the lake or the disk failing) says
    what to do, and callers fail with it rather than leave views behind the lake unnoticed."""
    warehouse = warehouse_of(lake_root, warehouse_path, extra_sql)
    try:
        damaged: list[SetAside] = []
        while True:
            try:
                done = warehouse.refresh(None if damaged else written)
                break
            except DamagedCopy as found:  # the build named it: only that file is set aside
                # Unless a landing has just replaced it whole: then the build runs again.
                if unreadable(warehouse.lake, found.path, pages=True) is not None:
                    again = lands_again(found.stream, found.path)
                    damaged.append(set_aside(warehouse.lake, found.path, found.reason, again))
            except duckdb.Error as error:
                # A view reads its files' footers when it is defined: a damaged file fails
                # the build. Set aside, the views are built over the rest, and its day lands
                # again.
                found = [] if disk_refusal(error) else set_aside_damaged_files(warehouse.lake)
                if not found:
                    raise
                damaged += found
        if damaged:
            done = (done or UP_TO_DATE) + "; " + damaged_note(damaged)
    except (OSError, duckdb.IOException) as error:
        raise WarehouseUnavailable(
            environment_fault(error, str(lake_root), Path(warehouse_path))
        ) from None
    except duckdb.Error as error:
        raise views_failed(error) from None
    return f"{warehouse_path} ({done or UP_TO_DATE})"


#: What a refresh says when the views read every file already.
UP_TO_DATE = "views up to date"


def views_failed(error: duckdb.Error) -> WarehouseUnavailable:
    """The views failed over what none of the product's streams holds: a file a
    `WAREHOUSE_SQL` source reads, written by others (DuckDB's words name it), or a row a
    view cannot convert."""
    cause = first_line(error)
    advice = (
        "A file it names that another system writes is damaged or unfinished: have it written again"
        if "file" in cause.lower()
        else "Correct the view or the data it reads (`sql/` and the folders WAREHOUSE_SQL lists)"
    )
    return WarehouseUnavailable(f"the warehouse's views failed: {cause}. {advice}")


def environment_fault(error: BaseException, lake_root: str, warehouse_path: Path) -> str:
    """What failed while the views were built, named by its setting: the warehouse file's
    disk, or the lake's disk or store."""
    then = "the views are built again by the next sync or `warehouse`"
    cause = disk_refusal(error)
    if cause is not None and str(warehouse_path.parent) in str(error):
        return (
            f"WAREHOUSE_PATH={warehouse_path}: its disk refused a write ({cause}): free space "
            f"there or point WAREHOUSE_PATH at a disk with room; {then}"
        )
    fault = lake_fault(error, lake_root, then)
    if fault is not None:
        return str(fault)
    return f"LAKE_ROOT={lake_root}: the views could not read the lake ({first_line(error)}); {then}"


def set_aside_damaged_files(lake: Lake) -> list[SetAside]:
    """Every file of the warehouse's streams that cannot be read, each page read: where a
    query of the warehouse failed, and DuckDB's words name no file. The push ledger's are
    not set aside but refused (`sync.refuse_if_damaged`): no run can make them again; nor
    the activities' apply log's, which alone says which activities are managed
    (`activities_state.refuse_if_damaged`)."""
    pushed.refuse_if_damaged(lake)
    activities_state.refuse_if_damaged(lake)
    remade = [s for s in WAREHOUSE_STREAMS if s not in (pushed.PUSHED, ACTIVITY_CHANGES)]
    return [f for s in remade for f in set_aside_damaged(lake, s, pages=True)]


def damaged_note(found: Sequence[SetAside]) -> str:
    """What a run that set files aside says: each damaged file, what it held, and when it
    lands; each file the lake did not write."""
    damaged = [f for f in found if not f.foreign]
    foreign = [f for f in found if f.foreign]
    again = f"; {LANDED_AGAIN}" if any(f.lands_again for f in damaged) else ""
    told = [f"damaged file(s) set aside: {'; '.join(map(str, damaged))}{again}"] if damaged else []
    if foreign:
        told.append(f"file(s) the lake did not write set aside: {'; '.join(map(str, foreign))}")
    return "; ".join(told)
