"""Times as the streams land them: a service's ISO 8601 moments parsed, and the `pulled_at`
stamp each landed file carries in its metadata."""

from datetime import UTC, datetime


def parse_moment(text: str | None) -> datetime | None:
    """An ISO 8601 date-time of a response, or None when the service gave none."""
    return datetime.fromisoformat(text) if text else None


def pulled_at() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
