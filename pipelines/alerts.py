"""Alerts: a short message where a team looks (Slack, email, a generic webhook) when something
fails and again when it recovers, one message per change of state (docs/dagster.md,
"Alerts"). Here, with no Dagster: the settings, the states kept between two looks, the
messages and their sending. `assets/alerts.py` decides what is looked at and when.

Sending is apprise's: each destination is one URL (`slack://…`, `mailto://…`,
`json://host:port/path` for a generic webhook). Those URLs hold tokens, so nothing here ever
shows one: a wrong entry of `ALERT_URLS` is named by its position, a failed delivery by its
position and scheme, and apprise's own log lines, which may quote a URL, are dropped. Every
message is scrubbed of the environment's keys and of the URLs' parts before it leaves
(`redacted`), in case an error's text carried one.

apprise is imported where a URL is checked or a message sent, not with this module: loading
its plugins is slow, and a process that sends nothing should not pay for it.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlsplit

from pipelines.errors import SetupError

URLS_VARIABLE = "ALERT_URLS"
#: The Dagster UI's address as the team opens it: each message about a run links the run.
UI_VARIABLE = "DAGSTER_UI_URL"
REJECTED_VARIABLE = "ALERT_REJECTED_ROWS"
#: A push that leaves this many rows of one record type unsent alerts (ALERT_REJECTED_ROWS).
DEFAULT_REJECTED_ROWS = 1
OFF = f"alerting is off: {URLS_VARIABLE} is not set"
#: The start of every message's title, so a team can filter on it.
PRODUCT = "warehouse-sync"
#: The push's figures that count rows left in `sync.rejected` (pipelines/push/plan.py,
#: pipelines/push/send.py): invalid or conflicting, held back, in doubt, refused by the hub.
NOT_SENT = ("rejected", "waiting", "in_doubt", "refused")
#: How many failed steps or days a message lists before it says how many more.
LISTED = 5

#: A comma that separates two entries of `ALERT_URLS`: one before the next entry's scheme (a
#: comma inside one URL, such as mailto's `to=a@x.com,b@x.com`, is kept).
_NEXT_URL = re.compile(r",(?=[A-Za-z][A-Za-z0-9+.-]*://)")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
#: Environment variables whose values are secrets, by name: the services' keys (`*_API_KEY`,
#: and a config file's `api_key_env` named so), `WEBHOOK_SECRET`, AWS's, `PGPASSWORD`.
_SECRET_NAME = re.compile(r"KEY|SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
#: Shorter values are not scrubbed from messages: they would blank ordinary words.
_SHORTEST_SECRET = 6
#: The shortest part of an `ALERT_URLS` entry (other than a password) taken for a token.
_SHORTEST_PART = 8


# -- settings ------------------------------------------------------------------------------


@dataclass(frozen=True)
class AlertSettings:
    """Where alerts go (`ALERT_URLS`, never shown) and the push's threshold."""

    urls: tuple[str, ...] = field(default=(), repr=False)
    rejected_rows: int = DEFAULT_REJECTED_ROWS
    #: `DAGSTER_UI_URL` without its last slash; empty: messages name the run by its id only.
    ui_url: str = ""

    def run_link(self, run_id: str) -> str:
        """Where the UI shows a run, or nothing without `DAGSTER_UI_URL`."""
        return f"{self.ui_url}/runs/{run_id}" if self.ui_url and run_id else ""

    @property
    def on(self) -> bool:
        return bool(self.urls)

    @property
    def schemes(self) -> list[str]:
        """Each destination's scheme (`slack`, `mailto`, `json`): what may be said of it."""
        return [scheme_of(url) for url in self.urls]

    def describe(self) -> str:
        """The setting as a check's table shows it: the kinds of destination, no URL."""
        if not self.on:
            return "unset: alerting off"
        return f"{len(self.urls)} destination(s): {', '.join(self.schemes)}"


def split_urls(value: str) -> list[str]:
    """The entries of an `ALERT_URLS` value: separated by whitespace, or by commas where the
    next entry starts with its `scheme://`."""
    entries = []
    for word in value.split():
        entries += [part.strip(",") for part in _NEXT_URL.split(word)]
    return [entry for entry in entries if entry]


def scheme_of(url: str) -> str:
    found = _SCHEME.match(url)
    return found.group(1).lower() if found else ""


def alert_settings(env: Mapping[str, str] | None = None) -> AlertSettings:
    """The settings from the environment; a `SetupError` naming the variable and what is
    wrong, never an entry's text, where one cannot be used."""
    env = os.environ if env is None else env
    urls = tuple(split_urls(env.get(URLS_VARIABLE, "")))
    for number, url in enumerate(urls, 1):
        problem = url_problem(url)
        if problem:
            raise SetupError(
                f"{URLS_VARIABLE}: entry {number} of {len(urls)} {problem} (not shown: it may "
                "hold a token). Each entry is an apprise URL such as slack://…, mailto://… or "
                "json://host:port/path, separated by spaces or commas"
            )
    ui_url = env.get(UI_VARIABLE, "").strip().rstrip("/")
    if ui_url and not re.match(r"^https?://[^/\s]+", ui_url):
        raise SetupError(
            f"{UI_VARIABLE}={ui_url!r} is not an http(s) address: set it to the Dagster UI's "
            "address as your team opens it (http://dagster.example.com:3000), or unset it"
        )
    return AlertSettings(urls, _threshold(env.get(REJECTED_VARIABLE, "")), ui_url)


def _threshold(value: str) -> int:
    if not value.strip():
        return DEFAULT_REJECTED_ROWS
    try:
        rows = int(value)
    except ValueError:
        rows = 0
    if rows < 1:
        raise SetupError(
            f"{REJECTED_VARIABLE}={value.strip()!r}: must be a whole number of rows, 1 or more "
            f"(default {DEFAULT_REJECTED_ROWS}): a push alerts when it leaves that many rows "
            "of one record type in sync.rejected"
        )
    return rows


def url_problem(url: str) -> str:
    """What makes `url` unusable to apprise ("" if nothing), said without quoting it: only
    a scheme apprise knows is named."""
    from apprise import Apprise
    from apprise.manager_plugins import NotificationManager

    scheme = scheme_of(url)
    if not scheme:
        return "is not a URL (it has no scheme://)"
    if scheme not in NotificationManager():
        return "has a scheme apprise does not know"
    with apprise_quiet():
        service = Apprise.instantiate(url)
    if service is None:
        return (
            f"({scheme}://) is not in the form apprise expects for {scheme}: a part is "
            "missing or wrong"
        )
    return ""


# -- what is never shown -------------------------------------------------------------------


def secrets(env: Mapping[str, str] | None = None) -> list[str]:
    """Every text a message must not carry: the values of the environment's secret variables,
    passwords in URLs of any variable, and each `ALERT_URLS` entry with its user, password,
    path segments and query values. Longest first, so a secret is scrubbed before any part
    of it."""
    env = os.environ if env is None else env
    found: set[str] = set()
    for name, value in env.items():
        value = value.strip()
        if _SECRET_NAME.search(name):
            found.add(value)
        if "://" in value and name != URLS_VARIABLE:
            found |= _url_secrets(value, parts=False)
    for url in split_urls(env.get(URLS_VARIABLE, "")):
        found |= {url} | _url_secrets(url, parts=True)
    return sorted((s for s in found if len(s) >= _SHORTEST_SECRET), key=len, reverse=True)


def _url_secrets(url: str, parts: bool) -> set[str]:
    """A URL's password; with `parts`, its user, path segments, query values and a host that
    is no name (apprise puts tokens anywhere: slack's host and path segments are tokens).
    Parts shorter than a token (`_SHORTEST_PART`) are left: a path such as `/alerts` would
    otherwise blank the word in every message."""
    try:
        split = urlsplit(url)
        password = split.password or ""
        found = set()
        if parts:
            found.add(split.username or "")
            segments = split.path.split("/")
            found |= {*segments, *(unquote(segment) for segment in segments)}
            found |= {value for _, value in parse_qsl(split.query)}
            if split.hostname and "." not in split.hostname:
                found.add(split.hostname)
    except ValueError:
        return set()
    found = {part.strip() for part in found if len(part.strip()) >= _SHORTEST_PART}
    return found | ({password} if password else set())


def redacted(text: str, env: Mapping[str, str] | None = None) -> str:
    """`text` with every secret of `secrets(env)` replaced by `***`."""
    for secret in secrets(env):
        text = text.replace(secret, "***")
    return text


class _Silenced(logging.Filter):
    """Drops every record of apprise's logger: its lines may quote a URL."""

    def filter(self, record: logging.LogRecord) -> bool:
        return False


class _Scrubbed(logging.Filter):
    """A record of the HTTP library under apprise (urllib3 logs each request's path, where a
    webhook's token may be) with the secrets taken out."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = redacted(record.getMessage()), None
        return True


_SILENCED, _SCRUBBED = _Silenced(), _Scrubbed()
#: urllib3's loggers that name a request (a filter of a logger holds for its own records only).
_HTTP_LOGGERS = ("urllib3.connectionpool", "urllib3.connection", "urllib3.util.retry")
#: How many threads are inside `apprise_quiet`: the filters stay until the last one leaves.
_quiet = {"inside": 0}
_quiet_lock = threading.Lock()


def _filtered() -> list[tuple[logging.Logger, logging.Filter]]:
    return [
        (logging.getLogger("apprise"), _SILENCED),
        *((logging.getLogger(name), _SCRUBBED) for name in _HTTP_LOGGERS),
    ]


@contextmanager
def apprise_quiet() -> Iterator[None]:
    """apprise's log lines dropped while apprise works (they may quote a URL), and the HTTP
    library's scrubbed; what went wrong is said by the caller, without a URL."""
    with _quiet_lock:
        _quiet["inside"] += 1
        for logger, kept_out in _filtered():
            logger.addFilter(kept_out)
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet["inside"] -= 1
            if not _quiet["inside"]:
                for logger, kept_out in _filtered():
                    logger.removeFilter(kept_out)


# -- messages ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Alert:
    """One message: a failure (`failing`) or a recovery. Scrubbed of secrets when made."""

    title: str
    body: str
    failing: bool

    def __post_init__(self) -> None:
        object.__setattr__(self, "title", redacted(self.title))
        object.__setattr__(self, "body", redacted(self.body))


def _first_line(text: str) -> str:
    text = (text or "").strip()
    return text.splitlines()[0].strip() if text else ""


def _of_run(run_id: str) -> str:
    """ " (run <id>)", or nothing for an event no run recorded."""
    return f" (run {run_id})" if run_id else ""


def _listed(items: Sequence[str]) -> str:
    shown = ", ".join(items[:LISTED])
    return shown + (f" and {len(items) - LISTED} more" if len(items) > LISTED else "")


def _said(text: str) -> list[str]:
    """An error's lines as a message shows them: at most `LISTED`, without blank ones."""
    lines = [line.strip() for line in (text or "").strip().splitlines() if line.strip()]
    return lines[:LISTED] + (["…"] if len(lines) > LISTED else [])


def run_failed(
    what: str, run_id: str, steps: Sequence[tuple[str, str]], reason: str, link: str = ""
) -> Alert:
    """A run failed. `what`: its job ("job comment_daily") or, for a run of assets picked
    in the UI, those assets; `steps`: (step, its error as the step said it: the product's
    words whole, with each failed connection's reason and setting, or a library's first
    line); `reason`: the run's own failure where no step failed (a worker that died, a run
    that could not start); `link`: the run in the UI, where `DAGSTER_UI_URL` is set."""
    lines = [f"Run {run_id} ({what}) failed."]
    for step, error in steps[:LISTED]:
        said = _said(error) or ["no message"]
        lines.append(f"Step {step}: {said[0]}")
        lines += [f"  {line}" for line in said[1:]]
    if len(steps) > LISTED:
        lines.append(f"… and {len(steps) - LISTED} more failed step(s).")
    if not steps:
        lines.append(_first_line(reason) or "No step failed: the run itself did.")
    where = f"open {link}" if link else "open the run in the Dagster UI (Runs, search its id)"
    lines.append(
        f"Next: {where} for the step's log, fix what the error says, then re-execute it. No "
        "more alerts for this until one of its runs succeeds."
    )
    return Alert(f"{PRODUCT}: {what} failed", "\n".join(lines), failing=True)


def run_recovered(what: str, run_id: str) -> Alert:
    return Alert(
        f"{PRODUCT}: {what} succeeded again",
        f"Run {run_id} ({what}) succeeded; the run before it had failed. Nothing to do.",
        failing=False,
    )


def check_failed(asset: str, check: str, run_id: str, description: str) -> Alert:
    said = _first_line(description)
    return Alert(
        f"{PRODUCT}: check {check} of {asset} failed",
        f"Asset check {asset}:{check} failed with severity ERROR{_of_run(run_id)}"
        + (f": {said}" if said else ".")
        + "\nNext: the check's result in the Dagster UI (asset "
        f"{asset}, Checks) says what it compared; docs/dagster.md lists the checks. One more "
        "alert when it passes again.",
        failing=True,
    )


def check_recovered(asset: str, check: str, run_id: str, passed: bool) -> Alert:
    now = "passes" if passed else "only warns"
    return Alert(
        f"{PRODUCT}: check {check} of {asset} {'passes' if passed else 'is out of ERROR'}",
        f"Asset check {asset}:{check} {now} again{_of_run(run_id)}. Nothing to do.",
        failing=False,
    )


def not_sent(figures: Mapping[str, object]) -> int:
    """The rows of one record type a push left in `sync.rejected`, from its figures."""
    return sum(int(figures.get(name) or 0) for name in NOT_SENT)  # type: ignore[call-overload]


def rows_rejected(
    record_type: str, figures: Mapping[str, object], threshold: int, run_id: str
) -> Alert:
    rows = not_sent(figures)
    parts = [f"{figures.get(n)} {n.replace('_', ' ')}" for n in NOT_SENT if figures.get(n)]
    return Alert(
        f"{PRODUCT}: push left {rows} {record_type} row(s) in sync.rejected",
        f"The push{_of_run(run_id)} did not send {rows} {record_type} row(s): "
        f"{', '.join(parts)} (alert at {threshold} or more, {REJECTED_VARIABLE}).\n"
        f"Next: SELECT * FROM sync.rejected WHERE record_type = '{record_type}' gives each "
        "row's field and reason; correct the rows in your outbound view and the next push "
        "sends them (docs/push.md). One more alert when a push leaves fewer.",
        failing=True,
    )


def rows_rejected_cleared(record_type: str, rows: int, threshold: int, run_id: str) -> Alert:
    return Alert(
        f"{PRODUCT}: push of {record_type} below the rejected-rows threshold again",
        f"The push{_of_run(run_id)} left {rows} {record_type} row(s) in sync.rejected, fewer "
        f"than {threshold} ({REJECTED_VARIABLE}). Nothing to do.",
        failing=False,
    )


def quarantined(events: int, days: Sequence[str], run_id: str) -> Alert:
    among = f" among the day(s) it rewrote ({_listed(days)})" if days else ""
    return Alert(
        f"{PRODUCT}: {events} webhook event(s) quarantined",
        f"The webhook compaction{_of_run(run_id)} put {events} event(s){among} in "
        "datahub.webhook_quarantine: their data cannot be read as JSON.\n"
        "Next: SELECT * FROM datahub.webhook_quarantine gives each event's reason and raw "
        "body (docs/webhooks.md). One more alert when a compaction quarantines none.",
        failing=True,
    )


def quarantine_cleared(run_id: str) -> Alert:
    return Alert(
        f"{PRODUCT}: webhook compaction quarantines nothing again",
        f"The webhook compaction{_of_run(run_id)} quarantined no event. Events quarantined "
        "before stay in datahub.webhook_quarantine until you deal with them.",
        failing=False,
    )


# -- state: one message per change ---------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    """The newest word on one watched thing (`key`: a check, a record type's push, the
    webhook compaction), and what to say if it changes its state."""

    key: str
    failing: bool
    alert: Alert


def changes(failing: Iterable[str], seen: Iterable[Seen]) -> list[Seen]:
    """What changed since the states `failing` (the keys failing when last looked at): a
    thing failing that was passing or unknown, or passing that was failing. The newest word
    per key wins; unknown to passing is no change."""
    was = set(failing)
    newest = {s.key: s for s in seen}
    return [s for s in newest.values() if s.failing != (s.key in was)]


def cursor_of(failing: Iterable[str]) -> str:
    return json.dumps({"failing": sorted(set(failing))})


def failing_of(cursor: str | None) -> set[str]:
    """The failing keys a cursor holds; none for no cursor or one not of this shape."""
    try:
        kept = json.loads(cursor or "{}").get("failing", [])
    except (ValueError, AttributeError):
        return set()
    return {key for key in kept if isinstance(key, str)}


# -- sending -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Delivery:
    destinations: int
    #: The destinations that did not take it, as "destination 2 of 3 (slack)".
    failed: tuple[str, ...] = ()

    @property
    def delivered(self) -> int:
        return self.destinations - len(self.failed)

    def said(self) -> str:
        if not self.failed:
            return f"sent to {self.destinations} destination(s)"
        return (
            f"not delivered to {', '.join(self.failed)} (check that destination's URL in "
            f"{URLS_VARIABLE} and that it is reachable from here)"
        )


def send(alert: Alert, settings: AlertSettings) -> Delivery:
    """`alert` to every destination, each on its own so one that fails is named (by its
    position and scheme) and the others still get it."""
    from apprise import Apprise, NotifyType

    failed = []
    with apprise_quiet():
        for number, url in enumerate(settings.urls, 1):
            destination = Apprise()
            taken = destination.add(url) and bool(
                destination.notify(
                    body=alert.body,
                    title=alert.title,
                    notify_type=NotifyType.FAILURE if alert.failing else NotifyType.SUCCESS,
                )
            )
            if not taken:
                failed.append(f"destination {number} of {len(settings.urls)} ({scheme_of(url)})")
    return Delivery(len(settings.urls), tuple(failed))
