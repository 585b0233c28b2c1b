"""The layers import one way: the core (`pipelines/`) knows nothing of Dagster, of the
Dagster layer (`assets/`) or of the command line (`cli/`, beside it, which may import both),
the Dagster layer nothing of the command line, and the sandbox, the services' stand-in,
nothing of the product. Read from the source, so a lazy import inside a function counts
too."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def imported_roots(path: Path) -> set[str]:
    """The top-level package of every module `path` imports, wherever the import sits."""
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def modules(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


@pytest.mark.parametrize(
    ("folder", "forbidden"),
    [
        ("pipelines", {"dagster", "dagster_webserver", "assets", "cli", "demo", "sandbox"}),
        ("assets", {"cli", "demo", "sandbox"}),
        ("cli", {"demo", "sandbox"}),
        ("sandbox", {"pipelines", "assets", "cli", "demo"}),
    ],
)
def test_a_layer_imports_nothing_above_it(folder, forbidden):
    found = modules(folder)
    assert len(found) > 3  # the walk saw the package, not an empty folder
    breaches = {
        str(path.relative_to(ROOT)): sorted(imported_roots(path) & forbidden) for path in found
    }
    assert {path: roots for path, roots in breaches.items() if roots} == {}


def test_the_check_sees_a_forbidden_import(tmp_path):
    module = tmp_path / "module.py"
    module.write_text(
        "def later():\n    from assets.sync import in_dagster\n    import dagster as dg\n"
    )
    assert imported_roots(module) == {"assets", "dagster"}


def core_part(module: str) -> str:
    """A module's part of the core: `pipelines.push.plan` -> `pipelines.push`."""
    return ".".join(module.split(".")[:2])


def core_arrows(folder: Path) -> dict[str, set[str]]:
    """Which parts of the core (a module or a subpackage of `folder/pipelines/`) each
    imports."""
    arrows: dict[str, set[str]] = {}
    for path in (folder / "pipelines").rglob("*.py"):
        source = core_part(".".join(path.relative_to(folder).with_suffix("").parts))
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            named = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                named = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                named = [alias.name for alias in node.names]
            for name in named:
                part = core_part(name)
                if name.startswith("pipelines.") and part != source:
                    arrows.setdefault(source, set()).add(part)
    return arrows


def a_cycle(arrows: dict[str, set[str]]) -> list[str]:
    """One cycle among the arrows, or [] where they all run one way."""
    done: set[str] = set()

    def walk(part: str, path: list[str]) -> list[str]:
        for target in sorted(arrows.get(part, ())):
            if target in path:
                return [*path[path.index(target) :], target]
            if target not in done:
                found = walk(target, [*path, target])
                if found:
                    return found
        done.add(part)
        return []

    for part in sorted(arrows):
        found = walk(part, [part])
        if found:
            return found
    return []


def test_arrows_inside_the_core_run_one_way():
    """No part of `pipelines/` imports, however indirectly, a part that imports it."""
    arrows = core_arrows(ROOT)
    assert len(arrows) > 10
    assert a_cycle(arrows) == []


def test_the_cycle_check_sees_a_cycle(tmp_path):
    (tmp_path / "pipelines" / "push").mkdir(parents=True)
    (tmp_path / "pipelines" / "catalog.py").write_text("from pipelines.push import ledger\n")
    (tmp_path / "pipelines" / "push" / "run.py").write_text("import pipelines.catalog\n")
    cycle = a_cycle(core_arrows(tmp_path))
    assert cycle in (
        ["pipelines.catalog", "pipelines.push", "pipelines.catalog"],
        ["pipelines.push", "pipelines.catalog", "pipelines.push"],
    )


def test_importing_the_core_changes_nothing_beyond_it():
    """Every module of `pipelines/` imported, in a process of its own: Arrow's memory pool,
    the import system and pyarrow's view of pandas are as they were. The process settings
    are made where a process starts (`pipelines/process.py`)."""
    modules = sorted(
        ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for path in (ROOT / "pipelines").rglob("*.py")
        if path.name not in {"__main__.py", "__init__.py"}
    )
    probe = (
        "import sys, importlib, pyarrow as pa\n"
        "pool, finders = pa.default_memory_pool().backend_name, list(sys.meta_path)\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "assert pa.default_memory_pool().backend_name == pool, pa.default_memory_pool()\n"
        "assert sys.meta_path == finders, sys.meta_path\n"
        "from pipelines import process\n"
        "process.prepare()\n"
        "assert pa.default_memory_pool().backend_name == 'system'\n"
        "pa.array([1]); assert 'pandas' not in sys.modules\n"
    )
    finished = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert finished.returncode == 0, finished.stderr
