"""Sandbox settings: one dataclass, filled from the command line or by tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sandbox.drift import DriftSpec
from sandbox.faults import FaultSpec


@dataclass(frozen=True)
class Scale:
    """How much history each region or workspace holds."""

    trigger_logs: int  # per comment automation workspace, over 365 days
    activities: int  # per workspace
    messages: int  # per conversation region, over 365 days
    conversation_members: int  # per conversation region
    teams: int
    users: int
    contacts: int  # data hub members per region
    broadcasts: int  # per data hub region


SCALES: dict[str, Scale] = {
    "small": Scale(
        trigger_logs=6_000,
        activities=12,
        messages=5_000,
        conversation_members=600,
        teams=6,
        users=25,
        contacts=1_500,
        broadcasts=40,
    ),
    "medium": Scale(
        trigger_logs=120_000,
        activities=40,
        messages=100_000,
        conversation_members=20_000,
        teams=15,
        users=120,
        contacts=25_000,
        broadcasts=150,
    ),
    "large": Scale(
        trigger_logs=1_100_000,
        activities=80,
        messages=1_050_000,
        conversation_members=120_000,
        teams=30,
        users=400,
        contacts=210_000,
        broadcasts=400,
    ),
}


#: The days of history a sandbox holds at most: the services' windows (trigger logs 365 days).
HISTORY_DAYS = 365

AGENT_PROMPT = "You are the shop's assistant. Answer briefly, in the member's language."


@dataclass
class SandboxConfig:
    seed: int = 7
    scale: str = "small"
    frozen: bool = False
    # Anchor of the data: history covers the 365 days before it. None = the moment of start.
    now: datetime | None = None
    # Days before the anchor the history's trigger logs, messages and broadcasts fall on
    # (the scale's counts, spread over fewer days); the services still serve their whole
    # windows (logs 365 days), older days empty. For a short soak (bench/soak.py). At most
    # HISTORY_DAYS, the windows' length.
    history_days: int = HISTORY_DAYS
    faults: FaultSpec = field(default_factory=FaultSpec)
    # Streams that change shape from a moment on (sandbox/drift.py); none by default.
    drift: DriftSpec = field(default_factory=DriftSpec)
    webhook_url: str | None = None
    webhook_secret: str | None = None
    # Seconds between webhook retries (attempt n waits n * this); the spec does not say.
    webhook_retry_delay: float = 1.0
    # Webhook deliveries in flight at once, taken in the order the events happened, so one
    # slow or retried event holds only its own slot; the spec does not say whether the hub
    # delivers one at a time. 1 delivers strictly in order (sandbox/webhooks.py).
    webhook_concurrency: int = 4
    # The brand's AI agent, called for each live member message (conversation service spec
    # section 2; sandbox/conversation/agent.py); none by default. The token is never shown.
    agent_url: str | None = None
    agent_token: str | None = field(default=None, repr=False)
    # Each region's agent configuration: its version, and a prompt where one is set, so both
    # versions and both forms of the request occur.
    agent_versions: dict[str, str] = field(default_factory=lambda: {"default": "1.1", "jp": "1.0"})
    agent_prompts: dict[str, str] = field(default_factory=lambda: {"default": AGENT_PROMPT})
    # Seconds before an agent call is tried again; the spec does not say.
    agent_retry_delay: float = 1.0
    # Rate limits: on by default, as documented. The window can be shortened for benchmarks
    # ("120 per 5 s" instead of "120 per 60 s"); the counts stay those of the spec.
    rate_limits: bool = True
    rate_window_seconds: float = 60.0
    # Live traffic when not frozen: new rows per minute per stream and region/workspace.
    arrivals_per_minute: float = 30.0
    # Live data hub campaigns (a broadcast and its webhook events) when not frozen: one per
    # region every this many minutes of data time; 0 runs none.
    campaign_minutes: float = 30.0
    # Asynchronous tasks spend this long in each intermediate state (pending, processing).
    task_phase_seconds: float = 1.0
    # Address the sandbox is reached at, used in download URLs it hands out.
    public_url: str = "http://127.0.0.1:8000"

    def __post_init__(self) -> None:
        if not 2 <= self.history_days <= HISTORY_DAYS:
            raise ValueError(f"history_days must be 2 to {HISTORY_DAYS}, not {self.history_days}")

    @property
    def sizes(self) -> Scale:
        return SCALES[self.scale]
