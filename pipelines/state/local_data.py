"""Where a host keeps its own stores by default: the push journal, the webhook inbox and the
push lease beside the lake, the rate budget in the host's state folder (docs/settings.md).
Light on purpose: the webhook receiver imports it, and
neither pyarrow nor DuckDB."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def data_dir(lake_root: str | os.PathLike[str], env: Mapping[str, str] | None = None) -> Path:
    """The folder holding a local lake. For a lake on an object store (`s3://…`), which
    cannot hold them (each is a file of one host), the folder of the warehouse file
    (`WAREHOUSE_PATH`), which is always local."""
    root = os.fspath(lake_root)
    if "://" not in root:
        return Path(root).parent
    env = os.environ if env is None else env
    return Path(env.get("WAREHOUSE_PATH", "data/warehouse.duckdb")).parent


def host_dir(env: Mapping[str, str] | None = None) -> Path:
    """This host's state folder, shared by every process of the user whatever its lake:
    `$XDG_STATE_HOME/warehouse-sync`, else `~/.local/state/warehouse-sync`."""
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or os.path.join(env.get("HOME") or "~", ".local", "state")
    return Path(base).expanduser() / "warehouse-sync"
