"""The push in Dagster: the job `push` sends, `push_dry_run` only plans, `resend_rejected`
sends again now the rows the service refused, a record type per partition. Each reports, per
record type, how many rows are new, changed, unchanged, stale, waiting, in doubt and
rejected.

Its lineage, for the catalog: the outbound views (`outbound/<view>`, defined with the
warehouse's views, which Dagster does not materialize itself) and the records the service of
each record type receives (`datahub/records/<record type>`, `conversation/records/<record
type>`), each a view's rows sent on. Those are one asset of Dagster's (`pushed_records`), so
each record type's page can push it ("Materialize"); the jobs record a materialization of
each record type they pushed (those with a view), with its figures; a dry run records none."""

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


class SendConfig(dg.Config):
    """What a push sends beyond what changed; each record type's page takes it too."""

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


class PushConfig(SendConfig):
    dry_run: bool = False
    #: Record types to push (all when empty): member_import, contact_profile, coupon, order,
    #: order_fulfillment, membership_tier, point, reservation, behavior_event,
    #: conversation_assignment, conversation_close.
    record_types: list[str] = []


def pushed(
    context: dg.OpExecutionContext,
    config: SendConfig,
    lake: LakeResource,
    services: dict[str, DataHubResource | ConversationResource],
    record_types: list[str] | None,
    dry_run: bool = False,
):
    """The core's push of `record_types` (all when None), and the metadata of each record
    type's materialization (none for a dry run, nor for a record type without its view):
    its figures and its newest rejected rows."""
    report = run_push(
        lake,
        services,
        dry_run,
        record_types,
        resend_in_doubt=config.resend_in_doubt or frozenset(config.resend_keys),
        log=context.log.info,
        run_id=context.run_id,
        retry_refused=config.retry_refused,
    )
    materialized = {
        record_type: {
            **figures,
            "rejected_rows": rejected_table(rejected_now(lake.lake(), record_type, REJECTED_SHOWN)),
        }
        for record_type, figures in report.figures.items()
        if not dry_run and record_type not in report.without_view
    }
    return report, materialized


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
    services = {"datahub": datahub, "conversation": conversation}
    types = config.record_types or None
    report, materialized = pushed(context, config, lake, services, types, config.dry_run)
    for record_type, record_metadata in materialized.items():
        context.log_event(
            dg.AssetMaterialization(SERVICE_RECORDS[record_type].key, metadata=record_metadata)
        )
    metadata = {
        record_type: dg.MetadataValue.json(figures)
        for record_type, figures in report.figures.items()
    }
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


RECORD_TYPE_OF = {spec.key: record_type for record_type, spec in SERVICE_RECORDS.items()}


@dg.multi_asset(
    name="pushed_records",
    specs=[spec.replace_attributes(skippable=True) for spec in SERVICE_RECORDS.values()],
    can_subset=True,
    pool=pool("datahub"),
    description="Push the selected record types: what changed in their outbound views.",
)
@tells_errors
def pushed_records(
    context: dg.AssetExecutionContext,
    config: SendConfig,
    lake: LakeResource,
    datahub: DataHubResource,
    conversation: ConversationResource,
):
    """A record type's "Materialize" on its page: the push of that record type alone (of
    those selected), recorded as its materialization. A record type without its view is
    materialized too, with its figures (the product's own rows alone, where it adds some;
    else none) and a word on the missing view: a "Materialize all" (an asset backfill)
    counts an asset it asked for and did not get as failed."""
    selected = [RECORD_TYPE_OF[key] for key in context.selected_asset_keys]
    services = {"datahub": datahub, "conversation": conversation}
    report, materialized = pushed(
        context, config, lake, services, [t for t in ORDER if t in selected]
    )
    for record_type in report.without_view:
        figures = report.figures.get(record_type, {})
        missing = f"none: write outbound.{OUTBOUND[record_type].view} in WAREHOUSE_SQL"
        materialized[record_type] = {**figures, "outbound view": missing}
    for record_type, metadata in materialized.items():
        yield dg.MaterializeResult(asset_key=SERVICE_RECORDS[record_type].key, metadata=metadata)


def _resend_config(record_type: str) -> dict:
    return {
        "ops": {
            "push_to_datahub": {"config": {"record_types": [record_type], "retry_refused": True}}
        }
    }


@dg.job(
    description="Send again now the rows the service refused of one record type (pick it as "
    "the partition): the push of that record type, its refused rows not waiting for their "
    "retry. The rows `sync.rejected` lists with `source` `service`.",
    config=dg.static_partitioned_config(partition_keys=list(ORDER))(_resend_config),
)
def resend_rejected():
    push_to_datahub()


#: The assets to define: the outbound views, and the records each record type's service holds.
ASSETS = [*OUTBOUND_VIEWS.values(), pushed_records]
JOBS = [push, push_dry_run, resend_rejected]
