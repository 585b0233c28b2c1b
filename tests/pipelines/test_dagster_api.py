"""The Dagster layer (`assets/`) uses Dagster through its public API, so that an upgrade of
Dagster cannot break it silently: one module alone, `assets/dagster_internals.py`, imports
Dagster's private modules, and its docstring says why for each name; no module writes to
Dagster's storage (its event log, its runs) other than through the events a step yields;
the run tags the product writes out are Dagster's own. Read from the source, so a lazy
import inside a function counts too."""

import ast
from pathlib import Path

import pytest
from dagster._core.storage import tags as dagster_tags

from assets import dagster_internals, tags

ROOT = Path(__file__).resolve().parents[2]
INTERNALS = ROOT / "assets" / "dagster_internals.py"
#: What writes to Dagster's storage without going through a step's events: its SQL tables
#: (through SQLAlchemy, which Dagster's storages use) and the storages' writing methods.
WRITES = {
    "index_transaction",
    "index_connection",
    "run_connection",
    "store_event",
    "handle_run_event",
    "add_run_tags",
    "delete_events",
    "wipe_asset",
    "wipe_asset_partitions",
    "AssetCheckExecutionsTable",
    "SqlEventLogStorage",
}
#: Dagster's storages, as the instance hands them out.
STORAGES = {"event_log_storage", "run_storage", "schedule_storage"}


def private_imports(tree: ast.AST) -> list[str]:
    """The private Dagster modules a module imports (`dagster._...`), wherever it does."""
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        found += [name for name in names if name.startswith("dagster._")][:1]
    return found


def storage_writes(tree: ast.AST) -> list[str]:
    """Where a module writes to Dagster's storage: SQLAlchemy imported, a writing name used,
    or a storage asked for anything but a read (`get_...`), directly or through a name it
    was given."""
    found, storage_names = [], set()
    for node in ast.walk(tree):
        value = getattr(node, "value", None) if isinstance(node, ast.Assign) else None
        if isinstance(value, ast.Attribute) and value.attr in STORAGES:
            storage_names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                modules.append(node.module)
            found += [f"imports {m}" for m in modules if m.split(".")[0] == "sqlalchemy"]
        elif isinstance(node, ast.Name | ast.Attribute):
            name = node.id if isinstance(node, ast.Name) else node.attr
            if name in WRITES:
                found.append(f"uses {name}")
        if isinstance(node, ast.Attribute) and not node.attr.startswith("get_"):
            owner = node.value
            of_storage = (isinstance(owner, ast.Attribute) and owner.attr in STORAGES) or (
                isinstance(owner, ast.Name) and owner.id in storage_names
            )
            if of_storage:
                found.append(f"calls the storage's {node.attr}")
    return found


def parsed(path: Path) -> ast.AST:
    return ast.parse(path.read_text(), str(path))


def layer() -> list[Path]:
    found = sorted((ROOT / "assets").rglob("*.py"))
    assert len(found) > 10  # the walk saw the package, not an empty folder
    return found


def test_only_dagster_internals_imports_dagsters_private_modules():
    importing = {
        str(path.relative_to(ROOT)): private_imports(parsed(path))
        for path in layer()
        if path != INTERNALS
    }
    assert {path: names for path, names in importing.items() if names} == {}


def test_dagster_internals_says_why_for_each_private_name_it_imports():
    docstring = dagster_internals.__doc__
    assert private_imports(parsed(INTERNALS))
    for name in dagster_internals.__all__:
        assert f"`{name}`" in docstring, name


def test_no_module_of_the_dagster_layer_writes_to_dagsters_storage():
    writing = {str(path.relative_to(ROOT)): storage_writes(parsed(path)) for path in layer()}
    assert {path: found for path, found in writing.items() if found} == {}


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("from dagster._core.storage.tags import X\n", ["dagster._core.storage.tags"]),
        ("def later():\n    import dagster._utils\n", ["dagster._utils"]),
        ("from dagster import _check\n", ["dagster._check"]),
        ("import dagster as dg\nfrom dagster import AssetKey\n", []),
    ],
)
def test_the_scan_sees_a_private_import(source, found):
    assert private_imports(ast.parse(source)) == found


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("import sqlalchemy as db\n", ["imports sqlalchemy"]),
        (
            "def f(context):\n    with context.instance.event_log_storage.index_transaction():"
            "\n        pass\n",
            ["uses index_transaction", "calls the storage's index_transaction"],
        ),
        (
            "def f(instance):\n    storage = instance.event_log_storage\n"
            "    storage.store_event(None)\n",
            ["uses store_event", "calls the storage's store_event"],
        ),
        (
            "def f(instance):\n    storage = instance.event_log_storage\n"
            "    return storage.get_asset_check_execution_history(None, limit=1)\n",
            [],
        ),
    ],
)
def test_the_scan_sees_a_write_to_dagsters_storage(source, found):
    assert sorted(storage_writes(ast.parse(source))) == sorted(found)


def test_the_run_tags_the_product_writes_out_are_dagsters_own():
    names = [name for name in vars(tags) if name.endswith("_TAG")]
    assert len(names) == 8
    for name in names:
        assert getattr(tags, name) == getattr(dagster_tags, name), name
