"""Every column of every asset says what it holds, as the Dagster catalog shows it: the
`dagster/column_schema` metadata of each asset (`assets/catalog.py`), whose descriptions come
from the clients' model fields' docstrings and the streams' declarations, and for the push's
assets from the data hub's fields (`assets/catalog.OUTBOUND_NOTES`, the validation models'
values). Every asset has owners and tags to filter by."""

import re

import pytest

from assets.definitions import STREAM_ASSETS, defs
from pipelines.push.plan import OUTBOUND
from pipelines.registry import PULLED

TRIGGERS = (
    "ig_comment",
    "ig_story",
    "ig_live",
    "fb_comment",
    "fb_live",
    "fb_message",
    "threads_reply",
)


def catalog() -> dict[str, dict[str, tuple[str, str | None]]]:
    """Each stream asset's columns as the catalog shows them: name -> (type, description)."""
    shown = {}
    for asset in STREAM_ASSETS:
        columns = asset.specs_by_key[asset.key].metadata["dagster/column_schema"].columns
        shown[asset.key.to_user_string()] = {c.name: (c.type, c.description) for c in columns}
    return shown


CATALOG = catalog()


def test_every_column_of_every_pulled_stream_is_described():
    undescribed = [
        f"{asset}.{name}"
        for asset, columns in CATALOG.items()
        for name, (_, note) in columns.items()
        if not (note or "").strip()
    ]
    assert undescribed == []
    # It looked at every pulled stream and all their columns, not at nothing.
    assert len(CATALOG) == len(PULLED)
    assert sum(len(columns) for columns in CATALOG.values()) > 200


#: Every asset of the code location, as the catalog shows it.
SPECS = {spec.key.to_user_string(): spec for spec in defs.resolve_all_asset_specs()}


def shown(spec) -> dict[str, tuple[str, str | None]]:
    columns = spec.metadata["dagster/column_schema"].columns
    return {c.name: (c.type, c.description) for c in columns}


def test_every_asset_has_owners_and_tags_to_filter_by():
    assert {key for key, spec in SPECS.items() if not spec.owners} == set()
    # Tags of ours, not only those Dagster adds for the kinds (`dagster/kind/...`).
    untagged = {
        key
        for key, spec in SPECS.items()
        if not [tag for tag in spec.tags if not tag.startswith("dagster/")]
    }
    assert untagged == set()
    receivers = {"datahub/webhook_events", "conversation/agent_requests"}
    assert receivers | {"warehouse/views"} <= set(SPECS)
    assert SPECS["warehouse/views"].tags["service"] == "warehouse"


def test_every_column_of_every_asset_is_described():
    undescribed = [
        f"{key}.{name}"
        for key, spec in SPECS.items()
        for name, (_, note) in shown(spec).items()
        if not (note or "").strip()
    ]
    assert undescribed == []
    # Every asset, the push's too: the pulled streams, the receivers' 3, the views, an
    # outbound view and the hub's records per record type.
    assert len(SPECS) == len(PULLED) + 3 + 1 + 2 * len(OUTBOUND)
    assert sum(len(shown(spec)) for spec in SPECS.values()) > 600


@pytest.mark.parametrize(
    ("asset", "column", "words"),
    [
        ("outbound/orders", "total_amount", ("after every discount",)),
        ("outbound/orders", "status", ("`created`", "`returned`")),
        ("datahub/records/order", "items", ("`price`", "`count`")),
        ("outbound/coupons", "timestamp", ("latest", "time zone")),
        ("outbound/coupons", "id", ("coupon's id",)),
        ("outbound/reservations", "id", ("reservation's id",)),
        ("outbound/points", "type", ("`loyalty_point`", "`store_credit`")),
        ("outbound/member_imports", "import_key", ("matched on",)),
        ("outbound/member_imports", "display_mobile", ("E.164",)),
        ("outbound/contact_profiles", "channel_type", ("`wccs`", "contact to update")),
        ("outbound/behavior_events", "params", ("`page_view`",)),
        ("datahub/webhook_events", "event", ("`message.open`",)),
        ("datahub/webhook_events", "timestamp", ("UTC",)),
    ],
)
def test_a_push_or_receiver_column_says_what_the_hub_means_by_it(
    asset: str, column: str, words: tuple[str, ...]
):
    note = shown(SPECS[asset])[column][1]
    for word in words:
        assert word in note, f"{asset}.{column}: {note}"


def test_descriptions_name_no_tracker_or_document_paths():
    for asset, columns in {key: shown(spec) for key, spec in SPECS.items()}.items():
        for name, (_, note) in columns.items():
            assert not re.search(r"#\d|\.md\b|/spec/|shared/", note or ""), f"{asset}.{name}"


def test_every_date_time_says_it_is_utc():
    """The lake's date-times are UTC; a daily stream's `date` is a UTC day."""
    checked = 0
    for asset, columns in CATALOG.items():
        for name, (kind, note) in columns.items():
            if kind.startswith("timestamp") or name == "date":
                assert "UTC" in note, f"{asset}.{name}: {note}"
                checked += 1
    assert checked >= 27


@pytest.mark.parametrize(
    ("asset", "column", "values"),
    [
        ("comment/trigger_logs", "status", ("`success`", "`failed`")),
        ("comment/trigger_logs", "trigger", tuple(f"`{t}`" for t in TRIGGERS)),
        ("comment/trigger_logs", "date", ("UTC day of `created_at`", "partition")),
        ("comment/trigger_logs", "created_at", ("UTC",)),
        ("comment/activities", "status", ("`draft`", "`active`", "`paused`")),
        ("comment/activities", "post_scope", ("`all`", "`selected`", "`next_post`")),
        ("comment/accounts", "platform", ("`instagram`", "`facebook`", "`threads`")),
        ("comment/workspace", "api_key_scope", ("`read`", "`read+write`")),
        ("comment/posts", "kind", ("`posts`", "`story`")),
        ("comment/daily_stats", "date", ("UTC day", "partition")),
        (
            "conversation/assignments",
            "assign_type",
            ("`case-based`", "`permanent`", "`unassigned`"),
        ),
        ("conversation/messages", "message_type", ("`text`", "`image`")),
        ("conversation/messages", "date", ("UTC day of `timestamp`",)),
        ("conversation/members", "processing_state", ("`blocked`", "`resolved`")),
        ("datahub/members", "gender", ("`male`", "`female`", "`unknown`", "`other`")),
        ("datahub/members", "display_mobile", ("E.164",)),
        ("datahub/members", "source", ("`maac`", "`caac`")),
        ("datahub/custom_fields", "options", ("`single_select`",)),
    ],
)
def test_a_description_carries_what_the_service_documents(
    asset: str, column: str, values: tuple[str, ...]
):
    note = CATALOG[asset][column][1]
    for value in values:
        assert value in note, f"{asset}.{column}: {note}"


def test_a_column_the_service_does_not_document_says_so():
    note = CATALOG["conversation/members"]["custom_id"][1]
    assert note == "As the service sends it; the service does not document it."
