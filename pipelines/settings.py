"""Where the pipeline's settings come from: environment variables, plus an optional TOML
file for more connections, path overrides and rate windows (`SYNC_CONFIG`, default
`./sync.toml` when it exists). Keys are only ever named here (the variable that holds them),
so they reach the resources through `dg.EnvVar` and never through a file.

`WAREHOUSE_SQL`: more SQL folders for the warehouse, laid out like `sql/` (a subfolder per
schema) and built after it (pipelines/warehouse.py says in which order): where a user's own
views live, the `outbound` views the push sends among them. A list separated by `os.pathsep`
(`:` on Linux and macOS), relative to the working directory; default none. `make demo` and
`make dev` set it to `demo/sql` (the demo shop and its example outbound views). Every
warehouse build (sync, push, `python -m pipelines warehouse`, the webhook compaction) reads
it from here, through `Settings.warehouse_sql` and the `lake` resource.

The file's shape (every section optional):

    [[connections.comment]]        # one more workspace
    name = "agency"
    base_url = "https://…/api/v1"
    api_key_env = "AGENCY_COMMENT_KEY"

    [paths.conversation]           # where the service documents no path
    list_users = "/v2/users"

    [service.comment]              # any field of the service's resource
    rate_window_seconds = 60
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: service -> [(connection name, URL variable, key variable)] read from the environment.
ENVIRONMENT_CONNECTIONS: dict[str, list[tuple[str, str, str]]] = {
    "comment": [("default", "COMMENT_AUTOMATION_URL", "COMMENT_AUTOMATION_API_KEY")],
    "conversation": [
        ("default", "CONVERSATION_URL", "CONVERSATION_API_KEY"),
        ("jp", "CONVERSATION_JP_URL", "CONVERSATION_JP_API_KEY"),
    ],
    "datahub": [
        ("default", "DATAHUB_URL", "DATAHUB_API_KEY"),
        ("jp", "DATAHUB_JP_URL", "DATAHUB_JP_API_KEY"),
    ],
}
SERVICES = tuple(ENVIRONMENT_CONNECTIONS)


@dataclass(frozen=True)
class ConnectionSetting:
    name: str
    base_url: str
    api_key_env: str


@dataclass
class Settings:
    lake_root: Path
    warehouse_path: Path
    connections: dict[str, list[ConnectionSetting]]
    paths: dict[str, dict[str, str]] = field(default_factory=dict)
    service_options: dict[str, dict] = field(default_factory=dict)
    #: `WAREHOUSE_SQL`, in the order listed.
    warehouse_sql: tuple[Path, ...] = ()


def warehouse_sql(value: str) -> tuple[Path, ...]:
    """The folders of a `WAREHOUSE_SQL` value; each must exist (a misspelt one would leave
    its views out of the warehouse without a word)."""
    folders = tuple(Path(entry) for entry in value.split(os.pathsep) if entry.strip())
    missing = [str(folder) for folder in folders if not folder.is_dir()]
    if missing:
        raise FileNotFoundError(
            f"WAREHOUSE_SQL names {missing}, which are not folders: correct the path, or "
            "leave that entry out"
        )
    return folders


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    env = os.environ if env is None else env
    connections: dict[str, list[ConnectionSetting]] = {service: [] for service in SERVICES}
    for service, entries in ENVIRONMENT_CONNECTIONS.items():
        for name, url_var, key_var in entries:
            if env.get(url_var):
                connections[service].append(ConnectionSetting(name, env[url_var], key_var))
    config_path = Path(env.get("SYNC_CONFIG", "sync.toml"))
    document: dict = {}
    if config_path.exists():
        document = tomllib.loads(config_path.read_text())
    elif "SYNC_CONFIG" in env:
        raise FileNotFoundError(f"SYNC_CONFIG names {config_path}, which does not exist")
    for service, entries in document.get("connections", {}).items():
        if service not in connections:
            raise ValueError(f"{config_path}: unknown service {service!r}; known: {SERVICES}")
        for entry in entries:
            connections[service].append(
                ConnectionSetting(entry["name"], entry["base_url"], entry["api_key_env"])
            )
    for service, entries in connections.items():
        names = [c.name for c in entries]
        if len(names) != len(set(names)):
            raise ValueError(f"{service}: connection names repeat: {names}")
    return Settings(
        lake_root=Path(env.get("LAKE_ROOT", "data/lake")),
        warehouse_path=Path(env.get("WAREHOUSE_PATH", "data/warehouse.duckdb")),
        connections=connections,
        paths=document.get("paths", {}),
        service_options=document.get("service", {}),
        warehouse_sql=warehouse_sql(env.get("WAREHOUSE_SQL", "")),
    )
