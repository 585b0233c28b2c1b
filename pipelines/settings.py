"""Where the pipeline's settings come from: environment variables, plus an optional TOML
file for more connections, path overrides and rate windows (`SYNC_CONFIG`, default
`./sync.toml` when it exists). Keys are only ever named here (the variable that holds them),
so they reach the resources through `dg.EnvVar` and never through a file.

`WAREHOUSE_SQL`: more SQL folders for the warehouse, laid out like `sql/` (a subfolder per
schema) and built after it (pipelines/warehouse/__init__.py says in which order): where a user's own
views live, the `outbound` views the push sends among them. A list separated by `os.pathsep`
(`:` on Linux and macOS), relative to the working directory; default none. `make demo` and
`make dev` set it to `demo/sql` (the demo shop and its example outbound views). Every
warehouse build (sync, push, `python -m cli warehouse`, the webhook compaction) reads
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

    [service.comment.contracts]    # what a landing does with drift (pipelines/lake/drift.py)
    trigger_logs = "freeze"

The file is checked whole before anything runs (`SetupError`, pipelines/mistakes.py): a TOML
error with its file, line and column; an unknown section, setting or contract's stream
with the closest valid name; a missing field by name; an `api_key_env` that is not a
variable's name (a key pasted there) refused without being shown.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pydantic

from pipelines.clients.base import Connection, Service
from pipelines.clients.comment import CommentAutomation
from pipelines.clients.conversation import ConversationService
from pipelines.clients.datahub import DataHub
from pipelines.errors import SetupError
from pipelines.lake import LakeLocation
from pipelines.lake.object_store import checked_root
from pipelines.mistakes import VARIABLE_NAME, closest, refuse_keys
from pipelines.state.budget import budget_location, check_location
from pipelines.streams.comment import STREAMS as COMMENT_STREAMS
from pipelines.streams.conversation import STREAMS as CONVERSATION_STREAMS
from pipelines.streams.datahub import STREAMS as DATAHUB_STREAMS

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
#: Each service's settings class: what `[service.<name>]` may set.
SERVICE_CLASSES: dict[str, type[Service]] = {
    "comment": CommentAutomation,
    "conversation": ConversationService,
    "datahub": DataHub,
}


@dataclass(frozen=True)
class ConnectionSetting:
    name: str
    base_url: str
    api_key_env: str
    #: Where `base_url` is set: a variable, or the config file's entry.
    base_url_from: str = ""


@dataclass
class Settings:
    #: A local folder or an object store's URI (`s3://bucket/prefix`).
    lake_root: str
    warehouse_path: Path
    connections: dict[str, list[ConnectionSetting]]
    paths: dict[str, dict[str, str]] = field(default_factory=dict)
    service_options: dict[str, dict] = field(default_factory=dict)
    #: `WAREHOUSE_SQL`, in the order listed.
    warehouse_sql: tuple[Path, ...] = ()
    #: Where a key's request budget is shared (`SYNC_BUDGET_STORE`, pipelines/state/budget.py).
    budget_store: str = ""


class _Strict(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")


class _ConnectionEntry(_Strict):
    name: str
    base_url: str
    api_key_env: str


class _ConfigFile(_Strict):
    connections: dict[str, list[_ConnectionEntry]] = {}
    paths: dict[str, dict[str, str]] = {}
    service: dict[str, dict[str, Any]] = {}


def warehouse_sql(value: str) -> tuple[Path, ...]:
    """The folders of a `WAREHOUSE_SQL` value; each must exist (a misspelt one would leave
    its views out of the warehouse without a word)."""
    folders = tuple(Path(entry) for entry in value.split(os.pathsep) if entry.strip())
    missing = [str(folder) for folder in folders if not folder.is_dir()]
    if missing:
        raise SetupError(
            f"WAREHOUSE_SQL names {missing}, which are not folders: correct the path, or "
            "leave that entry out"
        )
    return folders


def _where(location: tuple) -> str:
    """A pydantic error location as the file's reader sees it: `[service.comment] x`."""
    parts = [str(part) for part in location]
    if parts and parts[0] == "connections" and len(parts) > 2:
        return f"[[connections.{parts[1]}]] entry {int(parts[2]) + 1}" + "".join(
            f" {part}" for part in parts[3:]
        )
    if len(parts) >= 2:
        return f"[{parts[0]}.{parts[1]}]" + "".join(f" {part}" for part in parts[2:])
    return f"[{parts[0]}]" if parts else "the file"


def _file_error(config_path: Path, error: dict) -> str:
    location = tuple(error["loc"])
    if error["type"] == "extra_forbidden":
        known = {
            1: list(_ConfigFile.model_fields),
            3: list(_ConnectionEntry.model_fields),
        }.get(len(location), [])
        return (
            f"{config_path}: unknown {'section' if len(location) == 1 else 'setting'} "
            f'"{location[-1]}"{closest(str(location[-1]), known)}; known: {", ".join(known)}'
        )
    if error["type"] == "missing":
        return f"{config_path}: {_where(location[:-1])} lacks {location[-1]}: add it"
    return f"{config_path}: {_where(location)}: {error['msg']}"


def read_config_file(config_path: Path) -> _ConfigFile:
    try:
        text = config_path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SetupError(f"{config_path} (SYNC_CONFIG) cannot be read: {exc}") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # The message ends with "(at line L, column C)".
        raise SetupError(f"{config_path} is not valid TOML: {exc}") from None
    try:
        parsed = _ConfigFile.model_validate(document)
    except pydantic.ValidationError as exc:
        raise SetupError(_file_error(config_path, exc.errors()[0])) from None
    for section in ("connections", "paths", "service"):
        for service in getattr(parsed, section):
            if service not in SERVICES:
                raise SetupError(
                    f"{config_path}: unknown service in [{section}.{service}]"
                    f"{closest(service, list(SERVICES))}; known: {', '.join(SERVICES)}"
                )
    return parsed


#: Each service's streams, whose names a contract may use.
SERVICE_STREAMS = {
    "comment": COMMENT_STREAMS,
    "conversation": CONVERSATION_STREAMS,
    "datahub": DATAHUB_STREAMS,
}


def _check_service_options(config_path: Path, config: _ConfigFile) -> None:
    """`[service.x]` settings and `[paths.x]` operations checked against the service's own
    settings class, before any run starts."""
    for service, options in config.service.items():
        fields = [f for f in SERVICE_CLASSES[service].model_fields if f not in ("connections",)]
        for name in options:
            if name not in fields:
                raise SetupError(
                    f'{config_path}: [service.{service}] has no setting "{name}"'
                    f"{closest(name, fields)}; known: {', '.join(fields)}"
                )
    for service in config.paths:
        if "paths" not in SERVICE_CLASSES[service].model_fields:
            raise SetupError(
                f"{config_path}: [paths.{service}]: the {service} service documents every path "
                "it uses, so there is nothing to override: remove the section"
            )
    for service, options in config.service.items():
        known = [stream.name for stream in SERVICE_STREAMS[service]]
        for name in options.get("contracts") or {}:
            if name not in known:
                raise SetupError(
                    f'{config_path}: [service.{service}] contracts: no stream "{name}"'
                    f"{closest(name, known)}; known: {', '.join(known)}"
                )
    for service in set(config.service) | set(config.paths):
        options = dict(config.service.get(service, {}))
        if service in config.paths:
            options["paths"] = config.paths[service]
        try:
            SERVICE_CLASSES[service].model_validate({"connections": [], **options})
        except pydantic.ValidationError as exc:
            error = exc.errors()[0]
            message = error["msg"].removeprefix("Value error, ")
            if error["loc"][0] == "paths":
                raise SetupError(f"{config_path}: [paths.{service}]: {message}") from None
            what = " ".join(str(part) for part in error["loc"])
            raise SetupError(f"{config_path}: [service.{service}] {what}: {message}") from None


def _check_url(url: str, where: str) -> str:
    parsed = httpx.URL(url) if url else None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
        raise SetupError(
            f"{where} is not an http(s) address: set it to the service's base URL, e.g. "
            "https://api.example.com/v1"
        )
    return url


def _check_variable_name(name: str, where: str) -> str:
    if not VARIABLE_NAME.fullmatch(name):
        # Never shown: it may be the key itself, pasted where its variable's name belongs.
        raise SetupError(
            f"{where} must name the environment variable that holds the key (capitals, "
            "digits, underscores), not hold the key: put the key in a variable and name "
            "that variable here"
        )
    return name


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """The settings, checked whole; a mistake is a `SetupError` that says what to fix."""
    env = os.environ if env is None else env
    refuse_keys(env)
    connections: dict[str, list[ConnectionSetting]] = {service: [] for service in SERVICES}
    for service, entries in ENVIRONMENT_CONNECTIONS.items():
        for name, url_var, key_var in entries:
            if env.get(url_var):
                url = _check_url(env[url_var].strip(), f"{url_var} ({service} connection {name})")
                connections[service].append(ConnectionSetting(name, url, key_var, url_var))
    config_path = Path(env.get("SYNC_CONFIG", "sync.toml"))
    config = _ConfigFile()
    if config_path.exists():
        config = read_config_file(config_path)
        _check_service_options(config_path, config)
    elif "SYNC_CONFIG" in env:
        raise SetupError(
            f"SYNC_CONFIG names {config_path}, which does not exist: correct the path, or "
            "unset SYNC_CONFIG to use ./sync.toml when there is one"
        )
    for service, entries in config.connections.items():
        for number, entry in enumerate(entries, 1):
            where = f"{config_path}: [[connections.{service}]] entry {number} ({entry.name})"
            connections[service].append(
                ConnectionSetting(
                    entry.name,
                    _check_url(entry.base_url, f"{where} base_url"),
                    _check_variable_name(entry.api_key_env, f"{where} api_key_env"),
                    f"base_url of [[connections.{service}]] {entry.name} in {config_path}",
                )
            )
    for service, entries in connections.items():
        names = [c.name for c in entries]
        if len(names) != len(set(names)):
            raise SetupError(f"{service}: connection names repeat: {names}; give each its own name")
    return Settings(
        lake_root=checked_root(env.get("LAKE_ROOT", "data/lake")),
        warehouse_path=Path(env.get("WAREHOUSE_PATH", "data/warehouse.duckdb")),
        connections=connections,
        paths=config.paths,
        service_options=config.service,
        warehouse_sql=warehouse_sql(env.get("WAREHOUSE_SQL", "")),
        budget_store=check_location(budget_location(env)),
    )


def service_settings(
    settings: Settings, service: str, connection: type[Connection] = Connection
) -> dict[str, Any]:
    """What a service is made of: its connections (as `connection`, the Dagster layer's
    config class there) and its options, `[service.<service>]` and `[paths.<service>]` of
    `sync.toml`."""
    options: dict[str, Any] = dict(settings.service_options.get(service, {}))
    if service in settings.paths:
        options["paths"] = settings.paths[service]
    connections = [
        connection(
            name=c.name,
            base_url=c.base_url,
            base_url_from=c.base_url_from,
            api_key_env=c.api_key_env,
        )
        for c in settings.connections[service]
    ]
    return {"connections": connections, **options}


def services(settings: Settings) -> dict[str, Service]:
    """Each service's settings and connections, as the core's runs take them (the Dagster
    layer makes its resources of the same, `assets/resources.py`)."""
    return {
        service: made(**service_settings(settings, service))
        for service, made in SERVICE_CLASSES.items()
    }


def lake_location(settings: Settings) -> LakeLocation:
    """Where the lake and the warehouse are, and the warehouse's extra SQL folders."""
    return LakeLocation(
        lake_root=str(settings.lake_root),
        warehouse_path=str(settings.warehouse_path),
        warehouse_sql=[str(folder) for folder in settings.warehouse_sql],
    )
