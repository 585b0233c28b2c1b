"""The planning rules of pipelines/push/plan.py, directly: which version of a key is sent,
and why the others are not. The sandbox tests (test_push.py) show the same end to end."""

from datetime import timedelta

import pytest

from pipelines.push.ledger import Entry
from pipelines.push.plan import SENDING, content_hash, make_plan
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
    return Entry(timestamp, content_hash(body), "", state, None, "default")


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


def test_a_profile_update_sends_only_the_fields_that_changed():
    row = {
        "channel_type": "line",
        "external_channel_id": "1656001001",
        "external_member_id": "U1",
        "city": "Taipei",
        "member_level": "gold",
    }
    first = make_plan("contact_profile", [row], {})
    [planned] = first.to_send
    entry = Entry(None, planned.content_hash, planned.content, "accepted", None, "default")
    key = "line:1656001001:U1"
    moved = make_plan("contact_profile", [row | {"city": "Kaohsiung"}], {key: entry})
    [update] = moved.to_send
    assert update.body["data"] == {"city": "Kaohsiung"} and moved.counts["changed"] == 1
    assert make_plan("contact_profile", [row], {key: entry}).counts["unchanged"] == 1
