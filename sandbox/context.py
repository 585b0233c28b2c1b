"""What every emulated service shares: settings, clock, rate limiter, faults, webhooks, keys."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from sandbox.clock import Clock
from sandbox.config import SandboxConfig
from sandbox.errors import ApiError
from sandbox.faults import FaultInjector
from sandbox.ratelimit import RateLimiter
from sandbox.webhooks import WebhookDispatcher

# Demo keys (issue "Foundation"): printed at start and listed in the README.
COMMENT_KEYS = {
    "sa_live_demo_readwrite": ("demo", "read+write"),
    "sa_live_demo_readonly": ("demo", "read"),
    # A second workspace, as agencies hold several (one key per workspace).
    "sa_live_agency_readwrite": ("agency", "read+write"),
}
APIKEYS = {"demo-apikey"}

# Where each service and region is served; download URLs handed out by async jobs use it.
MOUNTS = {
    ("comment", "default"): "/comment/api/v1",
    ("conversation", "default"): "/conversation",
    ("conversation", "jp"): "/conversation-jp",
    ("datahub", "default"): "/datahub",
    ("datahub", "jp"): "/datahub-jp",
}


@dataclass
class Sandbox:
    config: SandboxConfig
    clock: Clock
    limiter: RateLimiter
    faults: FaultInjector | None = None
    webhooks: WebhookDispatcher | None = None

    @classmethod
    def create(
        cls, config: SandboxConfig, webhook_transport: httpx.AsyncBaseTransport | None = None
    ) -> Sandbox:
        sandbox = cls(
            config=config,
            clock=Clock(config.now, frozen=config.frozen),
            limiter=RateLimiter(config.rate_window_seconds, enabled=config.rate_limits),
        )
        sandbox.webhooks = WebhookDispatcher(
            config.webhook_url,
            config.webhook_secret,
            retry_delay=config.webhook_retry_delay,
            transport=webhook_transport,
            concurrency=config.webhook_concurrency,
        )
        return sandbox

    def seed_for(self, *names: str) -> list[int]:
        """A seed sequence for one stream: same sandbox seed and names, same rows."""
        return [self.config.seed, *(_stable_hash(n) for n in names)]

    def rate_limit(self, bucket: tuple, limit: int, *, header: bool) -> None:
        """Refuse with 429 once `limit` requests fell in the window for this bucket.

        `header` adds `Retry-After` (data hub profile update, spec section 7); the body always
        carries `retry_after` (comment automation spec section 7).
        """
        wait = self.limiter.hit(bucket, limit)
        if wait is not None:
            raise ApiError(
                429,
                "rate_limited",
                f"rate limit of {limit} requests per {self.limiter.window:g} s exceeded",
                retry_after=wait,
                headers={"Retry-After": str(wait)} if header else None,
            )


def _stable_hash(name: str) -> int:
    # Python's hash() of str is salted per process; this one is not.
    value = 0
    for char in name.encode():
        value = (value * 131 + char) % (2**31 - 1)
    return value
