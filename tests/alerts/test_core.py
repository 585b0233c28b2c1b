"""The core of alerts (pipelines/alerts.py), no Dagster: the settings read from the
environment, what is never shown, what counts as a change, and sending to several
destinations where one fails."""

import socket

import pytest

from pipelines import alerts
from pipelines.errors import SetupError
from pipelines.setup_check import check_alerts
from tests.alerts.conftest import TOKEN


def test_alert_urls_split_on_spaces_and_on_commas_before_a_scheme_only():
    value = f"slack://a/b/{TOKEN}, json://h:1/p\n mailto://u:pw@example.com?to=a@x.com,b@x.com"
    assert alerts.split_urls(value) == [
        f"slack://a/b/{TOKEN}",
        "json://h:1/p",
        "mailto://u:pw@example.com?to=a@x.com,b@x.com",
    ]
    assert alerts.split_urls(" ,  ") == []


def test_settings_default_off_with_a_threshold_of_one():
    settings = alerts.alert_settings({})
    assert not settings.on and settings.rejected_rows == 1
    assert settings.describe() == "unset: alerting off"
    on = alerts.alert_settings({"ALERT_URLS": f"json://127.0.0.1:9/{TOKEN}"})
    assert on.describe() == "1 destination(s): json" and TOKEN not in repr(on)


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        (f"hooks.example.com/{TOKEN}", "is not a URL (it has no scheme://)"),
        (f"slak{TOKEN}://x/y", "has a scheme apprise does not know"),
        ("slack://", "(slack://) is not in the form apprise expects for slack"),
    ],
)
def test_a_wrong_entry_is_named_by_its_position_never_shown(entry, said):
    with pytest.raises(SetupError) as raised:
        alerts.alert_settings({"ALERT_URLS": f"json://127.0.0.1:9/x {entry}"})
    message = str(raised.value)
    assert message.startswith("ALERT_URLS: entry 2 of 2 ") and said in message
    assert TOKEN not in message and "example.com" not in message and "\n" not in message


@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_a_threshold_that_is_no_count_of_rows_is_refused(value):
    with pytest.raises(SetupError, match="ALERT_REJECTED_ROWS="):
        alerts.alert_settings({"ALERT_REJECTED_ROWS": value})


def test_messages_carry_no_key_and_no_part_of_an_alert_url(monkeypatch):
    monkeypatch.setenv("ALERT_URLS", f"mailto://me:pw{TOKEN}@example.com json://h:1/hooks/x{TOKEN}")
    monkeypatch.setenv("DATAHUB_API_KEY", f"dh-{TOKEN}")
    monkeypatch.setenv("SYNC_STORE", f"postgresql://u:pg{TOKEN}@db/sync")
    said = alerts.run_failed(
        "push",
        "r1",
        [("push_to_datahub", f"refused dh-{TOKEN}, pw{TOKEN}, x{TOKEN} and pg{TOKEN}")],
        "",
    )
    assert TOKEN not in said.body + said.title
    assert "refused ***, ***, *** and ***" in said.body
    # Short parts of a URL (`/hooks`) are no token: the words stay.
    assert "hooks" not in alerts.secrets() and "Dagster UI" in said.body


def test_a_change_is_failing_after_passing_or_unknown_or_passing_after_failing():
    alert = alerts.Alert("t", "b", failing=True)

    def seen(key, failing):
        return alerts.Seen(key, failing, alert)

    assert alerts.changes(set(), [seen("a", False)]) == []  # unknown to passing
    assert alerts.changes(set(), [seen("a", True)]) == [seen("a", True)]
    assert alerts.changes({"a"}, [seen("a", True)]) == []
    assert alerts.changes({"a"}, [seen("a", False)]) == [seen("a", False)]
    # The newest word per thing counts.
    assert alerts.changes(set(), [seen("a", True), seen("a", False)]) == []
    assert alerts.failing_of(alerts.cursor_of({"b", "a"})) == {"a", "b"}
    assert alerts.failing_of("not json") == set() and alerts.failing_of(None) == set()


def test_a_destination_that_cannot_be_reached_is_named_and_the_others_still_get_it(receiver):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    settings = alerts.alert_settings(
        {"ALERT_URLS": f"{receiver.url}, json://127.0.0.1:{port}/hooks/{TOKEN}"}
    )
    delivery = alerts.send(alerts.Alert("title", "body", failing=True), settings)
    assert delivery.failed == ("destination 2 of 2 (json)",) and delivery.delivered == 1
    assert [(b["title"], b["message"], b["type"]) for b in receiver.bodies] == [
        ("title", "body", "failure")
    ]
    assert TOKEN not in delivery.said()


def test_the_setup_check_shows_alerting_off_or_what_is_wrong(monkeypatch):
    monkeypatch.delenv("ALERT_URLS", raising=False)
    row = check_alerts()
    assert (row.connection, row.url, row.result) == ("ALERT_URLS", "unset: alerting off", "ok")
    monkeypatch.setenv("ALERT_URLS", f"json://127.0.0.1:9/x, slack:/{TOKEN}")
    row = check_alerts()
    assert row.result == "FAILED" and row.problem.startswith("ALERT_URLS: entry 2 of 2")
    assert TOKEN not in row.problem + row.url
