"""`python -m cli check` for the UI: the job `check_setup` makes the same cheap
authenticated call per connection and checks the lake and the shared store
(`pipelines/setup_check.py`), shows every result as a table, and fails naming each that is not
right and what to do."""

import dagster as dg

from assets.resources import (
    CommentAutomationResource,
    ConversationResource,
    DataHubResource,
    LakeResource,
)
from pipelines.setup_check import check_everything

_COLUMNS = dg.TableSchema(
    columns=[
        dg.TableColumn("service"),
        dg.TableColumn("connection"),
        dg.TableColumn("url"),
        dg.TableColumn("result", description="ok, or what is wrong and what to do"),
    ]
)


@dg.op(
    description=(
        "One cheap authenticated call per connection; the lake written to, the shared store "
        "reached, the webhook secret present."
    )
)
def check_every_connection(
    context: dg.OpExecutionContext,
    comment: CommentAutomationResource,
    conversation: ConversationResource,
    datahub: DataHubResource,
    lake: LakeResource,
) -> dg.Output:
    services = {"comment": comment, "conversation": conversation, "datahub": datahub}
    checked = check_everything(services, lake.lake_root, lake.warehouse_sql)
    table = dg.MetadataValue.table(
        records=[
            dg.TableRecord(
                {
                    "service": c.service,
                    "connection": c.connection,
                    "url": c.url,
                    "result": c.problem or (f"warning: {c.warning}" if c.warning else "ok"),
                }
            )
            for c in checked
        ],
        schema=_COLUMNS,
    )
    failed = [c for c in checked if not c.ok]
    if failed:
        raise dg.Failure(
            description="\n".join(c.problem for c in failed),
            metadata={"connections": table},
        )
    for c in checked:
        if c.warning:
            context.log.warning(f"{c.service} {c.connection}: {c.warning}")
    context.log.info(f"all {len(checked)} rows are right")
    return dg.Output(None, metadata={"connections": table})


@dg.job(
    description="Is the setup right? One call per connection, the lake, the shared store; "
    "fails naming what to fix."
)
def check_setup():
    check_every_connection()


JOBS = [check_setup]
