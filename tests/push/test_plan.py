"""The planning rules of pipelines/push/plan.py, directly: how a row is keyed, which version
of a key is sent, and why the others are not (plus pipelines/push/send.py refusing a row
planned to an unknown connection). The sandbox tests (test_push.py) show the same end to
end."""

from datetime import UTC, timedelta
from zoneinfo import ZoneInfo

import duckdb
import pytest

from pipelines.push.ledger import Entry, as_json
from pipelines.push.plan import OUTCOMES, SENDING, content_hash, make_plan
from pipelines.push.run import outbound_rows
from pipelines.push.send import send_plan
from pipelines.push.validation import validate_record
from tests.push.test_validation import ROWS, SAMPLES, TS

ORDER = ROWS["order"]
TEN, ELEVEN = TS, TS + timedelta(hours=1)


def order(at, **changes) -> dict:
    return ORDER | {"timestamp": at} | changes


def accepted(row: dict, record_type: str = "order", state: str = "accepted") -> Entry:
    """The ledger entry of a row the service took."""
    body, problems = validate_record(record_type, row)
    assert problems == []
    timestamp = row.get("timestamp") if record_type != "behavior_event" else None
    return Entry(timestamp, content_hash(as_json(body)), "", state, None, "default")


def sent_timestamps(plan) -> list[str]:
    return [planned.body["timestamp"] for planned in plan.to_send]


def waiting_reasons(plan) -> list[str]:
    return [r["reason"] for r in plan.rejections if r["source"] == "waiting"]


def test_the_newest_version_of_a_key_is_sent_once():
    plan = make_plan("order", [order(TEN), order(ELEVEN, status="returned"), order(TEN)], {})
    assert sent_timestamps(plan) == [ELEVEN.isoformat()]
    assert plan.figures() == dict.fromkeys(plan.figures(), 0) | {"new": 1}


def test_an_accepted_version_is_unchanged_and_an_older_one_stale():
    newest = order(ELEVEN, status="returned")
    assert make_plan("order", [newest], {"ord-1": accepted(newest)}).counts["unchanged"] == 1
    older = make_plan("order", [order(TEN)], {"ord-1": accepted(newest)})
    assert older.to_send == [] and older.counts["stale"] == 1


def test_a_newer_version_than_the_accepted_one_is_changed():
    plan = make_plan("order", [order(ELEVEN, status="returned")], {"ord-1": accepted(order(TEN))})
    assert sent_timestamps(plan) == [ELEVEN.isoformat()] and plan.counts["changed"] == 1


def test_a_different_version_with_the_accepted_timestamp_is_a_conflict():
    plan = make_plan("order", [order(TEN, status="returned")], {"ord-1": accepted(order(TEN))})
    assert plan.to_send == []
    assert [r["source"] for r in plan.rejections] == ["conflict"]


@pytest.mark.parametrize("accepted_before", [False, True])
def test_a_key_whose_newest_version_is_invalid_waits(accepted_before):
    """Regression: the valid 10:00 version was sent, and became the hub's current state,
    though the warehouse's newest version of the key (11:00) was invalid."""
    rows = [order(TEN), order(ELEVEN, currency="TWDX")]
    ledger = {"ord-1": accepted(order(TEN))} if accepted_before else {}
    plan = make_plan("order", rows, ledger)
    assert plan.to_send == []
    assert plan.counts["waiting"] == 1 and plan.counts["rejected"] == 1
    assert plan.counts["unchanged"] == plan.counts["new"] == 0
    [invalid] = [r for r in plan.rejections if r["source"] == "validation"]
    assert invalid["field"] == "currency"
    [why] = waiting_reasons(plan)
    assert f"newest version ({ELEVEN.isoformat()}) is invalid" in why
    fixed = make_plan("order", [order(TEN), order(ELEVEN, currency="TWD")], ledger)
    assert sent_timestamps(fixed) == [ELEVEN.isoformat()] and fixed.counts["waiting"] == 0


def test_an_invalid_row_older_than_the_newest_does_not_hold_the_key():
    plan = make_plan("order", [order(TEN, currency="TWDX"), order(ELEVEN)], {})
    assert sent_timestamps(plan) == [ELEVEN.isoformat()]
    assert plan.counts["rejected"] == 1 and plan.counts["waiting"] == 0


def test_an_invalid_row_at_the_newest_timestamp_is_a_conflict_that_waits():
    plan = make_plan("order", [order(ELEVEN), order(ELEVEN, currency="TWDX")], {})
    assert plan.to_send == [] and plan.counts["waiting"] == 1


def test_a_version_without_a_readable_timestamp_holds_the_key():
    naive = order(ELEVEN.replace(tzinfo=None))
    plan = make_plan("order", [order(TEN), naive], {})
    assert plan.to_send == [] and plan.counts["waiting"] == 1
    assert "no readable timestamp" in waiting_reasons(plan)[0]


def test_conflicting_newest_versions_send_nothing_not_even_an_older_one():
    rows = [order(TEN), order(ELEVEN, status="returned"), order(ELEVEN, status="cancelled")]
    plan = make_plan("order", rows, {})
    assert plan.to_send == []
    assert [r["source"] for r in plan.rejections].count("conflict") == 2
    assert plan.counts["waiting"] == 1 and plan.counts["rejected"] == 2


def test_a_key_with_only_invalid_rows_is_rejected_not_waiting():
    plan = make_plan("order", [order(TEN, currency="TWDX")], {})
    assert plan.to_send == [] and plan.counts["rejected"] == 1 and plan.counts["waiting"] == 0


def page_view(key: str, **params) -> dict:
    _, row = SAMPLES["page_view"]
    return row | {"event_key": key, "params": row["params"] | params}


def test_behavior_events_are_sent_once_per_key():
    rows = [page_view("ev-1"), page_view("ev-2"), page_view("ev-1")]
    plan = make_plan("behavior_event", rows, {})
    assert [planned.key for planned in plan.to_send] == ["ev-1", "ev-2"]
    again = make_plan("behavior_event", rows, {"ev-1": accepted(rows[0], "behavior_event")})
    assert [planned.key for planned in again.to_send] == ["ev-2"]
    assert again.counts["unchanged"] == 1


def test_a_behavior_event_whose_last_row_is_invalid_waits():
    rows = [page_view("ev-1"), page_view("ev-1", page_title=None)]
    plan = make_plan("behavior_event", rows, {})
    assert plan.to_send == [] and plan.counts["waiting"] == 1


def test_a_behavior_event_in_doubt_is_reported_and_sent_only_when_asked():
    """A killed run sent it and never heard back: the hub may hold it, and it stores every
    submission, so a resend could store the event twice."""
    row = page_view("ev-1")
    ledger = {"ev-1": accepted(row, "behavior_event", state=SENDING)}
    plan = make_plan("behavior_event", [row], ledger)
    assert plan.to_send == [] and plan.counts["in_doubt"] == 1
    assert [r["source"] for r in plan.rejections] == ["in_doubt"]
    resent = make_plan("behavior_event", [row], ledger, resend_in_doubt=True)
    assert [planned.key for planned in resent.to_send] == ["ev-1"]
    # Or only the keys chosen: the others stay in doubt.
    two = [row, page_view("ev-2")]
    both = ledger | {"ev-2": accepted(two[1], "behavior_event", state=SENDING)}
    chosen = make_plan("behavior_event", two, both, resend_in_doubt=frozenset({"ev-2"}))
    assert [planned.key for planned in chosen.to_send] == ["ev-2"]
    assert chosen.counts["in_doubt"] == 1


def test_a_record_marked_sending_is_in_doubt_only_while_its_push_may_still_send_it():
    """Marked `sending` with no answer: sent again once every push that marked it has ended
    (a resend changes nothing the hub holds as current), in doubt while one may still be
    alive (stalled past its lease), unless the view holds a newer version."""
    ledger = {"ord-1": accepted(order(TEN), state=SENDING)}
    assert [p.key for p in make_plan("order", [order(TEN)], ledger).to_send] == ["ord-1"]
    stalled = make_plan("order", [order(TEN)], ledger, senders_gone=False)
    assert stalled.to_send == [] and stalled.counts["in_doubt"] == 1
    (reason,) = [r["reason"] for r in stalled.rejections if r["source"] == "in_doubt"]
    assert "stalled past its lease" in reason and "--resend-in-doubt" in reason
    asked = make_plan("order", [order(TEN)], ledger, resend_in_doubt=True, senders_gone=False)
    assert [p.key for p in asked.to_send] == ["ord-1"]
    newer = make_plan("order", [order(TEN), order(ELEVEN)], ledger, senders_gone=False)
    assert sent_timestamps(newer) == [ELEVEN.isoformat()] and newer.counts["in_doubt"] == 0


PROFILE = {
    "channel_type": "line",
    "external_channel_id": "1656001001",
    "external_member_id": "U1",
    "city": "Taipei",
    "member_level": "gold",
    "cl_custom_nickname": "Mei",
}
#: The connection's pulled definition of the profile's one custom field.
CUSTOM_FIELDS = {"default": [{"key": "nickname", "type": "text", "active": True}]}


def ledger_entry(planned, state: str = "accepted") -> Entry:
    """The ledger entry of a planned row once the service answered it."""
    return Entry(
        planned.timestamp, planned.content_hash, planned.content, state, None, planned.connection
    )


def profile_plan(rows: list[dict], accepted: dict):
    return make_plan("contact_profile", rows, accepted, CUSTOM_FIELDS)


@pytest.mark.parametrize(
    ("change", "sent_data"),
    [
        ({"city": "Kaohsiung"}, {"city": "Kaohsiung"}),
        ({"cl_custom_nickname": "May"}, {"custom_fields": {"cl_custom_nickname": "May"}}),
        (
            {"member_level": None, "cl_custom_nickname": None},
            {"member_level": None, "custom_fields": {"cl_custom_nickname": None}},
        ),
        ({}, None),
    ],
    ids=["profile-field", "custom-field-only", "both-cleared", "nothing"],
)
def test_a_profile_update_sends_only_the_fields_that_changed(change, sent_data):
    [planned] = profile_plan([PROFILE], {}).to_send
    key = "line:1656001001:U1"
    moved = profile_plan([PROFILE | change], {key: ledger_entry(planned)})
    if sent_data is None:
        assert moved.to_send == [] and moved.counts["unchanged"] == 1
        return
    [update] = moved.to_send
    assert update.body["data"] == sent_data and moved.counts["changed"] == 1
    # The ledger keeps the whole profile, against which the next push is compared.
    assert update.content == profile_plan([PROFILE | change], {}).to_send[0].content


def member_import(import_key, **values) -> dict:
    return {"import_key": import_key, "connection": "default"} | values


MEI = {"display_email": "mei.lin@shop.example", "customer_id": "C00001234"}


def test_member_import_rows_matching_on_different_attributes_are_different_keys():
    rows = [member_import("display_email", **MEI), member_import("customer_id", **MEI)]
    plan = make_plan("member_import", rows, {})
    assert [(p.key, p.import_key) for p in plan.to_send] == [
        ("display_email:mei.lin@shop.example", "display_email"),
        ("customer_id:C00001234", "customer_id"),
    ]
    assert plan.counts["new"] == 2


@pytest.mark.parametrize(
    ("row", "key", "problem_field"),
    [
        (member_import(None, **MEI), "", "import_key"),
        (member_import("phone", **MEI), "phone:", "import_key"),
        (member_import(7, **MEI), "7", "import_key"),
        (member_import("customer_id", display_email="a@b.tw"), "customer_id:", "customer_id"),
    ],
    ids=["absent", "not-an-attribute", "not-text", "attribute-without-value"],
)
def test_a_member_import_row_without_a_usable_import_key_is_rejected(row, key, problem_field):
    plan = make_plan("member_import", [row], {})
    assert plan.to_send == [] and plan.counts["rejected"] == 1
    assert [(r["key"], r["field"]) for r in plan.rejections] == [(key, problem_field)]


UNTIMESTAMPED = {
    "member_import": (member_import("customer_id", **MEI, city="Taipei"), {"city": "Kaohsiung"}),
    "contact_profile": (PROFILE, {"city": "Kaohsiung"}),
    "behavior_event": (
        page_view("ev-1"),
        {"params": page_view("ev-1", page_title="Sale")["params"]},
    ),
}


@pytest.mark.parametrize("accepted_before", [False, True], ids=["new", "changed"])
@pytest.mark.parametrize("record_type", UNTIMESTAMPED)
def test_without_a_timestamp_the_last_row_of_a_key_is_its_newest(record_type, accepted_before):
    first, change = UNTIMESTAMPED[record_type]
    last = first | change
    [planned_first] = make_plan(record_type, [first], {}, CUSTOM_FIELDS).to_send
    [planned_last] = make_plan(record_type, [last], {}, CUSTOM_FIELDS).to_send
    ledger = {planned_first.key: ledger_entry(planned_first)} if accepted_before else {}
    plan = make_plan(record_type, [first, last], ledger, CUSTOM_FIELDS)
    [sent] = plan.to_send
    assert sent.content == planned_last.content
    assert plan.counts["changed" if accepted_before else "new"] == 1
    again = make_plan(
        record_type, [last, first], {sent.key: ledger_entry(planned_first)}, CUSTOM_FIELDS
    )
    assert again.to_send == [] and again.counts["unchanged"] == 1


@pytest.mark.parametrize(
    ("record_type", "row"),
    [
        ("order", order(TEN)),
        ("behavior_event", page_view("ev-1")),
        ("member_import", member_import("customer_id", **MEI)),
    ],
    ids=["order", "behavior_event", "member_import"],
)
def test_a_row_whose_last_send_failed_is_sent_again_as_new(record_type, row):
    """Failed: the service answered that it did not take the row (a refusal, or an import
    task that failed), so the same content is not unchanged."""
    [planned] = make_plan(record_type, [row], {}).to_send
    plan = make_plan(record_type, [row], {planned.key: ledger_entry(planned, "failed")})
    assert [p.key for p in plan.to_send] == [planned.key]
    assert plan.figures() == dict.fromkeys(OUTCOMES, 0) | {"new": 1}


class Unwritten:
    """A ledger nothing may reach: a row the send refuses before its request has no answer."""

    def record(self, *_args, **_kwargs):
        raise AssertionError("the ledger was written")


def test_a_row_naming_an_unknown_connection_is_planned_to_it_and_refused_when_sent():
    plan = make_plan("order", [order(TEN, connection="elsewhere")], {})
    [planned] = plan.to_send
    assert planned.connection == "elsewhere" and plan.counts["new"] == 1
    sent = send_plan(plan, {}, Unwritten())
    assert (sent.accepted, sent.refused) == (0, 1)
    [refusal] = sent.rejections
    assert (refusal["key"], refusal["field"]) == ("ord-1", "connection")
    assert refusal["reason"] == "refused by the service: 400 unknown_connection"


def test_a_views_timestamps_plan_the_same_body_whatever_the_machines_zone():
    """DuckDB gives a TIMESTAMPTZ in the session's zone, the machine's by default: read
    as it came, an order planned in Taipei had `+08:00` in its body and so another content
    hash than the same order planned in UTC, and would be sent again as changed."""
    planned = {}
    for zone in ("Asia/Taipei", "UTC"):
        with duckdb.connect() as con:
            con.execute(f"SET TimeZone = '{zone}'")
            con.execute("CREATE SCHEMA outbound")
            con.execute(
                "CREATE VIEW outbound.orders AS "
                "SELECT TIMESTAMPTZ '2026-10-30 09:15:30+08' AS timestamp"
            )
            [row] = outbound_rows(con, "outbound.orders")
        plan = make_plan("order", [order(row["timestamp"])], {}, {})
        [planned[zone]] = plan.to_send
    assert planned["Asia/Taipei"].body["timestamp"] == "2026-10-30T01:15:30+00:00"
    assert planned["Asia/Taipei"].content_hash == planned["UTC"].content_hash


def test_a_version_accepted_with_its_times_in_another_zone_is_unchanged():
    """A ledger written by a push that read the views in the machine's zone holds `+08:00`
    where the body planned now says `+00:00`: the same record, so it is neither a conflict
    nor sent again; a real change at that moment still is a conflict."""
    in_taipei = TEN.astimezone(ZoneInfo("Asia/Taipei"))
    body, problems = validate_record("order", order(in_taipei))
    assert problems == [] and body["timestamp"].endswith("+08:00")
    content = as_json(body)
    entry = Entry(in_taipei, content_hash(content), content, "accepted", None, "default")
    in_utc = order(TEN.astimezone(UTC))
    plan = make_plan("order", [in_utc], {"ord-1": entry})
    assert plan.to_send == [] and plan.rejections == []
    assert plan.counts["unchanged"] == 1
    changed = make_plan("order", [in_utc | {"status": "returned"}], {"ord-1": entry})
    assert [r["source"] for r in changed.rejections] == ["conflict"]
