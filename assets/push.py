"""The push as Dagster jobs: `push` sends, `push_dry_run` only plans. Both report, per
record type, how many rows are new, changed, unchanged, stale, waiting, in doubt and
rejected."""

import dagster as dg

from assets.factory import pool
from assets.resources import DataHubResource, LakeResource
from pipelines.push.run import ORDER, run_push


class PushConfig(dg.Config):
    dry_run: bool = False
    #: Record types to push (all when empty): member_import, contact_profile, coupon, order,
    #: order_fulfillment, membership_tier, point, reservation, behavior_event.
    record_types: list[str] = []
    #: Send again the behavior events a killed run may or may not have delivered (they are
    #: reported as in_doubt and not sent by default: a resend could store one twice).
    resend_in_doubt: bool = False


@dg.op(pool=pool("datahub"), description="Plan, and unless a dry run, send the outbound rows.")
def push_to_datahub(
    context: dg.OpExecutionContext, config: PushConfig, lake: LakeResource, datahub: DataHubResource
) -> dg.Output:
    unknown = sorted(set(config.record_types) - set(ORDER))
    if unknown:
        raise dg.Failure(f"unknown record types {unknown}; known: {list(ORDER)}")
    report = run_push(
        lake,
        datahub,
        config.dry_run,
        config.record_types or None,
        resend_in_doubt=config.resend_in_doubt,
        log=context.log.info,
    )
    metadata = {
        record_type: dg.MetadataValue.json(figures)
        for record_type, figures in report.figures.items()
    }
    return dg.Output(
        report.figures,
        metadata={"dry_run": config.dry_run, **metadata, **report.stats.as_metadata()},
    )


@dg.job(description="Send what changed in the outbound views to the data hub.")
def push():
    push_to_datahub()


@dg.job(
    description="Plan the push and send nothing: the figures a real push would have.",
    config={"ops": {"push_to_datahub": {"config": {"dry_run": True}}}},
)
def push_dry_run():
    push_to_datahub()


JOBS = [push, push_dry_run]
