"""What a command's start leaves out: the command line's launcher (`cli/__main__.py`),
and the package's own refusals (`pipelines/__init__.py`); and that a command still ends
cleanly."""

import os
import subprocess
import sys

import duckdb
import httpcore
import pytest

from pipelines import refused
from pipelines.settings import load_settings


@pytest.mark.parametrize(
    "argv", [["sync", "--streams", "workspace"], ["push", "--dry-run"]], ids=["sync", "push"]
)
def test_a_command_leaves_out_what_it_never_uses_and_exits_without_a_word_on_stderr(
    frozen_sandbox, sync_env, argv
):
    """httpcore's async locks (anyio) and httpx's own command line are never imported, nor
    Dagster where no DAGSTER_HOME keeps an instance (a sync lands, a push sends, in its own
    process); the collector's frozen objects are given back before the teardown, where
    DuckDB's bindings would report each one alive as a leak."""
    sync_env(frozen_sandbox)
    # As `python -m cli <argv>`, then the modules it loaded.
    command = (
        "import runpy, sys\n"
        f"sys.argv = ['cli', *{argv!r}]\n"
        "try:\n"
        "    runpy.run_module('cli', run_name='__main__', alter_sys=True)\n"
        "finally:\n"
        "    print('loaded:', ' '.join(sorted(sys.modules)))\n"
        "    import atexit\n"
        "    atexit.register(print, 'an exit handler of the command ran')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", command],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "DAGSTER_HOME"},
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (line,) = [line for line in done.stdout.splitlines() if line.startswith("loaded: ")]
    loaded = set(line.split()[1:])
    assert {"httpx", "httpcore", "duckdb", "pyarrow"} <= loaded
    assert not {"anyio", "httpx._main", "dagster"} & loaded
    assert "leak" not in done.stderr, done.stderr
    # The process ends before the interpreter's teardown, not before its exit handlers, and
    # what it printed (to a pipe: buffered) reaches the reader.
    assert done.stdout.endswith("an exit handler of the command ran\n")
    if argv[0] == "push":  # its figures, with no outbound view to read
        assert "record type" in done.stdout and "member_import" in done.stdout
        return
    settings = load_settings()
    with duckdb.connect(str(settings.warehouse_path), read_only=True) as con:
        landed = con.execute("SELECT id FROM comment.workspace").fetchall()
    (workspace,) = landed  # the one connection's workspace, as the sandbox holds it
    assert workspace[0] in frozen_sandbox.truth()["comment"]


@pytest.mark.parametrize("buffered", [True, False])
def test_a_reader_that_goes_away_ends_the_command_with_status_1_and_no_traceback(
    frozen_sandbox, sync_env, buffered
):
    """Unbuffered, a `print` fails while the command runs; buffered, the last flush."""
    sync_env(frozen_sandbox)
    env = os.environ.copy()
    env.pop("PYTHONUNBUFFERED", None)
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    command = [sys.executable, "-m", "cli", "sync", "--streams", "workspace"]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as process:
        process.stdout.close()  # as `| head` does once it has read enough
        stderr = process.stderr.read()
    assert process.returncode == 1, stderr
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr, stderr


def test_a_module_refused_for_one_import_is_there_for_the_next():
    """The refusal holds inside its block only: outside, the same module imports, so a
    process that loaded httpx under it can still import what the block held back."""
    sys.modules.pop("json.tool", None)
    with refused("json.tool"):
        try:
            import json.tool  # noqa: F401
        except ModuleNotFoundError as error:
            assert "json.tool" in str(error)
        else:
            raise AssertionError("json.tool imported inside the block")
    import json.tool  # noqa: F401, F811

    assert "json.tool" in sys.modules
    # Only the launcher refuses anyio: a process that imports `pipelines` otherwise (this one,
    # the receiver, the tests' async clients) keeps httpcore's async locks.
    assert httpcore._synchronization.anyio is not None


def test_pyarrow_never_imports_pandas_to_convert_values_but_still_can_for_pandas():
    """Once a process is prepared (`pipelines/process.py`), every kind of conversion the
    landing does (a value whose type Arrow infers, a Python value given to a compute
    function, rows as dicts) leaves pandas out of the process; asking for a pandas object
    still imports it."""
    command = (
        "import sys\n"
        "from pipelines import process\n"
        "process.prepare()\n"
        "import pyarrow as pa, pyarrow.compute as pc\n"
        "texts = pa.array(['a', ''], pa.string())\n"
        "pa.scalar('connection')\n"
        "pc.divide(pa.array([3_000_000], pa.int64()), 1_000_000)\n"
        "pc.if_else(pc.equal(texts, ''), None, texts)\n"
        "pa.Table.from_pylist([{'id': 'a', 'n': 1}])\n"
        "print('converted:', 'pandas' in sys.modules)\n"
        "pa.table({'n': [1]}).to_pandas()\n"
        "print('to_pandas:', 'pandas' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", command], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["converted:", "False", "to_pandas:", "True"]


def test_the_commands_former_name_runs_the_command_line(frozen_sandbox, sync_env):
    """`python -m pipelines`, as crontabs written before `cli/` call it: the same command,
    its arguments and exit status, in the same process (`pipelines/__main__.py`)."""
    sync_env(frozen_sandbox)
    former = subprocess.run(
        [sys.executable, "-m", "pipelines", "sync", "--streams", "nowhere"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    current = subprocess.run(
        [sys.executable, "-m", "cli", "sync", "--streams", "nowhere"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert former.returncode == current.returncode == 2
    assert former.stderr == current.stderr and "nowhere" in former.stderr
