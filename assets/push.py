"""The push as Dagster jobs: `push` sends, `push_dry_run` only plans. Both report, per
record type, how many rows are new, changed, unchanged, stale, waiting, in doubt and
rejected.

Its lineage, for the catalog: the outbound views (`outbound/<view>`, defined with the
warehouse's views) and the records the service of each record type receives
(`datahub/records/<record type>`, `conversation/records/<record type>`), each a view's rows
sent on. Both are assets Dagster does not materialize itself; the
`push` job records a materialization of each record type it pushed (those with a view), with
its figures; a dry run records none."""

import dagster as dg

from assets.catalog import column_schema_of, outbound_columns
from assets.factory import owners, pool, service_tag
from assets.failures import tells_errors
from assets.resources import ConversationResource, DataHubResource, LakeResource
from pipelines.push.ledger import rejected_now
from pipelines.push.plan import OUTBOUND
from pipelines.push.run import ORDER, run_push
from pipelines.push.validation import view_columns

WAREHOUSE_VIEWS = dg.AssetKey(["warehouse", "views"])
#: How each service a record type goes to is named on its assets.
SERVICE_NAMES = {"datahub": "data hub", "conversation": "conversation service"}


def _columns(record_type: str) -> dict[str, dg.TableSchema]:
    return {"dagster/column_schema": column_schema_of(outbound_columns(record_type))}


def _lineage(record_type: str, view: dg.AssetKey) -> dict[str, dg.TableColumnLineage]:
    """Each field the service receives is the outbound view's column of the same name
    (validated, never renamed), so Dagster draws where each comes from."""
    return {
        "dagster/column_lineage": dg.TableColumnLineage(
            {
                column: [dg.TableColumnDep(asset_key=view, column_name=column)]
                for column, *_ in view_columns(record_type)
            }
        )
    }


OUTBOUND_VIEWS = {
    record_type: dg.AssetSpec(
        ["outbound", outbound.view],
        group_name="warehouse",
        kinds={"duckdb"},
        deps=[WAREHOUSE_VIEWS],
        owners=owners(),
        tags=service_tag(outbound.service, "push"),
        description=(
            f"`outbound.{outbound.view}`: the {record_type} records to push, a view of yours "
            "in a folder `WAREHOUSE_SQL` lists. Its columns are those validation reads."
        ),
        metadata=_columns(record_type) | {"dagster/table_name": f"outbound.{outbound.view}"},
    )
    for record_type, outbound in OUTBOUND.items()
}
SERVICE_RECORDS = {
    record_type: dg.AssetSpec(
        [outbound.service, "records", record_type],
        group_name="push",
        kinds={outbound.service},
        tags=service_tag(outbound.service, "push"),
        owners=owners(),
        deps=[OUTBOUND_VIEWS[record_type].key],
        description=(
            f"The {SERVICE_NAMES[outbound.service]}'s {record_type} records: what the `push` "
            f"job sent of `outbound.{outbound.view}` and the service accepted (the ledger is "
            "`sync.pushed`)."
        ),
        metadata=_columns(record_type) | _lineage(record_type, OUTBOUND_VIEWS[record_type].key),
    )
    for record_type, outbound in OUTBOUND.items()
}
SPECS = [*OUTBOUND_VIEWS.values(), *SERVICE_RECORDS.values()]
#: How many of a record type's rejected rows its materialization shows (all are in
#: `sync.rejected`).
REJECTED_SHOWN = 20
REJECTED_COLUMNS = {
    "key": "The record's key.",
    "field": "The field that failed, dotted into nested ones (items.0.price).",
    "reason": "Why the row was not sent.",
    "source": "validation, conflict, waiting, in_doubt, or service (refused when sent).",
    "first_seen": "When a push first kept it (UTC).",
}


def rejected_table(rows: list[dict]) -> dg.MetadataValue:
    """The newest of a record type's rejected rows, as a table on its asset's page."""
    schema = dg.TableSchema(
        columns=[
            dg.TableColumn(name, "string", description=note)
            for name, note in REJECTED_COLUMNS.items()
        ]
    )
    records = [dg.TableRecord({name: str(row[name]) for name in REJECTED_COLUMNS}) for row in rows]
    return dg.MetadataValue.table(records, schema)


class PushConfig(dg.Config):
    dry_run: bool = False
    #: Record types to push (all when empty): member_import, contact_profile, coupon, order,
    #: order_fulfillment, membership_tier, point, reservation, behavior_event,
    #: conversation_assignment, conversation_close.
    record_types: list[str] = []
    #: Send again the behavior events a killed run may or may not have delivered (they are
    #: reported as in_doubt and not sent by default: a resend could store one twice).
    resend_in_doubt: bool = False
    #: Send again only these rows in doubt: their keys as `sync.rejected` lists them (its
    #: `key` where `source` is `in_doubt`); the others stay in doubt. Name their record types
    #: in `record_types` too.
    resend_keys: list[str] = []
    #: Send again now the rows the service refused, though unchanged (by default one waits
    #: for a change, or for its retry: an hour, doubling up to a day).
    retry_refused: bool = False


@dg.op(pool=pool("datahub"), description="Plan, and unless a dry run, send the outbound rows.")
@tells_errors
def push_to_datahub(
    context: dg.OpExecutionContext,
    config: PushConfig,
    lake: LakeResource,
    datahub: DataHubResource,
    conversation: ConversationResource,
) -> dg.Output:
    """Named for the data hub, where the push began; it sends each record type to its own
    service (the conversation service's too)."""
    unknown = sorted(set(config.record_types) - set(ORDER))
    if unknown:
        raise dg.Failure(f"unknown record types {unknown}; known: {list(ORDER)}")
    report = run_push(
        lake,
        {"datahub": datahub, "conversation": conversation},
        config.dry_run,
        config.record_types or None,
        resend_in_doubt=config.resend_in_doubt or frozenset(config.resend_keys),
        log=context.log.info,
        run_id=context.run_id,
        retry_refused=config.retry_refused,
    )
    metadata = {
        record_type: dg.MetadataValue.json(figures)
        for record_type, figures in report.figures.items()
    }
    if not config.dry_run:
        for record_type, figures in report.figures.items():
            if record_type not in report.without_view:
                rejected = rejected_table(rejected_now(lake.lake(), record_type, REJECTED_SHOWN))
                context.log_event(
                    dg.AssetMaterialization(
                        SERVICE_RECORDS[record_type].key,
                        metadata={**figures, "rejected_rows": rejected},
                    )
                )
    return dg.Output(
        report.figures,
        metadata={"dry_run": config.dry_run, **metadata, **report.stats.as_metadata()},
    )


@dg.job(
    description="Send what changed in the outbound views to the data hub and the "
    "conversation service."
)
def push():
    push_to_datahub()


@dg.job(
    description="Plan the push and send nothing: the figures a real push would have.",
    config={"ops": {"push_to_datahub": {"config": {"dry_run": True}}}},
)
def push_dry_run():
    push_to_datahub()


JOBS = [push, push_dry_run]
