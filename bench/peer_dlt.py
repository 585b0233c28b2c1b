"""`python -m bench.peer_dlt WHAT DATA`: the same pull through dlt, our peer, for `bench.peer`.

dlt's fastest documented path for a paged REST API into DuckDB (its docs: "Optimizing dlt",
"RESTClient", "Arrow table / Pandas"): one resource yields the page numbers and a
parallelized transformer fetches each page with `RESTClient` (retries, auth), parses it with
dlt's own JSON (orjson) and returns it as an Arrow table, which dlt writes as Parquet and
loads without normalizing row by row; merged into DuckDB on the key `id`. Requests in flight:
`EXTRACT__WORKERS`, 4 here as the pipeline's read-ahead and the 4-in-flight bare loop; the
rest of its settings are dlt's defaults (normalize in process, as its docs advise on a
machine whose cores are shared).

- `trigger_logs`: every trigger log the service serves (`--days`, `--limit` per page) into
  the table `trigger_logs`, `created_at` as a UTC timestamp as ours;
- `workspace`: one request, `GET /me`, into the table `workspace`: the fixed cost.

The service is read from the pipeline's own variables (`COMMENT_AUTOMATION_URL`,
`COMMENT_AUTOMATION_API_KEY`); everything dlt keeps goes under DATA (`pipelines/` its working
folder, `peer.duckdb` the destination). Needs the `bench` dependency group (`make bench`).
"""

from __future__ import annotations

import argparse
import math
import os
from pathlib import Path

import dlt
import pyarrow as pa
import pyarrow.compute as pc
from dlt.common import json
from dlt.sources.helpers.rest_client import RESTClient
from dlt.sources.helpers.rest_client.auth import BearerTokenAuth

UTC_MICROSECONDS = pa.timestamp("us", tz="UTC")


def comment_client() -> RESTClient:
    return RESTClient(
        base_url=os.environ["COMMENT_AUTOMATION_URL"],
        auth=BearerTokenAuth(os.environ["COMMENT_AUTOMATION_API_KEY"]),
    )


@dlt.source(name="comment_automation")
def comment_automation(days: int, limit: int):
    client = comment_client()

    @dlt.resource(selected=False)
    def log_pages():
        total = client.get("/logs", params={"days": days, "limit": 1}).json()["total"]
        yield from range(math.ceil(total / limit))

    @dlt.transformer(
        data_from=log_pages,
        parallelized=True,
        primary_key="id",
        write_disposition="merge",
    )
    def trigger_logs(page: int) -> pa.Table:
        answer = client.get("/logs", params={"days": days, "page": page, "limit": limit})
        answer.raise_for_status()
        logs = pa.Table.from_pylist(json.loadb(answer.content)["logs"])
        moments = pc.cast(logs["created_at"], UTC_MICROSECONDS)
        return logs.set_column(logs.schema.get_field_index("created_at"), "created_at", moments)

    return log_pages, trigger_logs


@dlt.resource(primary_key="id", write_disposition="merge")
def workspace():
    answer = comment_client().get("/me")
    answer.raise_for_status()
    yield pa.Table.from_pylist([json.loadb(answer.content)["workspace"]])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.peer_dlt", description=__doc__)
    parser.add_argument("what", choices=["trigger_logs", "workspace"])
    parser.add_argument("data", type=Path)
    parser.add_argument("--days", type=int)
    parser.add_argument("--limit", type=int)
    args = parser.parse_args(argv)
    # dlt's configuration through its variables, read when the pipeline is made: no telemetry
    # (the machine reaches no outside service), and the threads of the parallelized transformer.
    os.environ.setdefault("RUNTIME__DLTHUB_TELEMETRY", "false")
    os.environ.setdefault("EXTRACT__WORKERS", "4")
    pipeline = dlt.pipeline(
        pipeline_name="peer",
        pipelines_dir=str(args.data / "pipelines"),
        destination=dlt.destinations.duckdb(str(args.data / "peer.duckdb")),
        dataset_name="comment",
    )
    source = comment_automation(args.days, args.limit) if args.what == "trigger_logs" else workspace
    pipeline.run(source).raise_on_failed_jobs()


if __name__ == "__main__":
    main()
