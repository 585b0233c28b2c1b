"""`make demo`: start the sandbox and show the three services answering.

Until the pull pipeline lands (issue 3) this shows a few calls per service and the sandbox's
ground truth; the pull issue turns it into a full sync.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

import httpx

from pipelines.sandbox_process import running_sandbox

COMMENT_KEY = {"Authorization": "Bearer sa_live_demo_readonly"}
APIKEY = {"apikey": "demo-apikey"}


def show(base: str) -> None:
    with httpx.Client(base_url=base, timeout=30) as http:
        me = http.get("/comment/api/v1/me", headers=COMMENT_KEY).json()
        logs = http.get("/comment/api/v1/logs", params={"limit": 3}, headers=COMMENT_KEY).json()
        stats = http.get("/comment/api/v1/stats", params={"days": 7}, headers=COMMENT_KEY).json()
        print(
            f"comment automation: workspace {me['workspace']['name']!r}, "
            f"{logs['total']:,} trigger logs; last 7 days {stats['totals']}"
        )
        for log in logs["logs"]:
            print(
                f"    {log['created_at']}  {log['status']:<7} {log['action']:<12} "
                f"{log['comment_text']!r}"
            )
        for region in ("conversation", "conversation-jp"):
            channels = http.get(f"/{region}/openapi.json").json()["paths"]
            listed = _call(http, region, "list_channels", channels)
            print(
                f"{region}: {len(listed['channels'])} channels, e.g. "
                f"{[c['name'] for c in listed['channels'][:3]]}"
            )
        for region in ("datahub", "datahub-jp"):
            fields = http.get(f"/{region}/cdh/v1/custom-fields/", headers=APIKEY).json()
            broadcasts = _call(
                http, region, "list_broadcasts", http.get(f"/{region}/openapi.json").json()["paths"]
            )
            print(f"{region}: {len(fields)} custom fields, {len(broadcasts)} broadcasts")
        order = http.post(
            "/datahub/v1/records/order",
            headers=APIKEY,
            json={
                "timestamp": datetime.now(UTC).isoformat(),
                "source_platform_name": "demo-shop",
                "source_store_type": "online_store",
                "source_store_id": "store-1",
                "source_platform_customer_id": "customer-42",
                "id": "order-1001",
                "status": "confirmed",
                "total_amount": 59.0,
                "currency": "USD",
                "items": [{"id": "sku-1", "name": "Tote bag", "price": 59.0, "count": 1}],
                "payment_method": "card",
                "delivery_method": "courier",
                "shipping_location": "Lisbon",
            },
        )
        print(f"data hub: order record submitted -> {order.status_code} {order.json()}")
        truth = http.get("/_sandbox/truth").json()
        print("ground truth (/_sandbox/truth):")
        for service, scopes in truth.items():
            for scope, counts in scopes.items():
                shown = ", ".join(f"{k}={v:,}" for k, v in counts.items())
                print(f"    {service:<13} {scope:<38} {shown}")


def _call(http: httpx.Client, region: str, operation_id: str, paths: dict):
    """Find an operation by its operationId in the service's OpenAPI document and call it."""
    for path, methods in paths.items():
        for method, operation in methods.items():
            if operation.get("operationId") == operation_id:
                answer = http.request(method.upper(), f"/{region}{path}", headers=APIKEY)
                answer.raise_for_status()
                return answer.json()
    raise LookupError(f"{region} has no operation {operation_id}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m pipelines.demo")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    with running_sandbox(args.port, "--frozen") as base:
        print(f"sandbox running at {base} (frozen, small, seed 7)\n")
        show(base)
        print(
            "\nKeep one running with `make sandbox`, then browse "
            f"{base}/comment/api/v1/openapi.json or call it with the demo keys in the README."
        )


if __name__ == "__main__":
    main()
