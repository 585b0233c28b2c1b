"""Two test runs on one machine keep their temporary folders apart (`tests/conftest.py`):
each run has a base folder of its own under the clone's `.pytest-tmp/`, shared by its xdist
workers, and removed when the run ends (or by the next run, where it was killed); a run
beside it takes nothing of it away."""

import getpass
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.conftest import TEMPORARY

ROOT = Path(__file__).resolve().parent.parent
PROBE = Path(__file__).with_name("basetemp_probe.py")


def inner_run(told: Path, *options: str, release: Path | None = None) -> subprocess.Popen:
    """`tests/basetemp_probe.py` in a pytest of its own, as a person would start one."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PROBE_TOLD"] = str(told)
    if release is not None:
        env["PROBE_RELEASE"] = str(release)
    told.mkdir()
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options, str(PROBE)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def ended(run: subprocess.Popen) -> str:
    output, _ = run.communicate(timeout=180)
    assert run.returncode == 0, output
    return output


def told_bases(told: Path) -> set[Path]:
    return {Path(f.read_text()) for f in told.iterdir()}


def test_runs_beside_each_other_keep_their_folders(tmp_path):
    release = tmp_path / "release"
    held = inner_run(tmp_path / "held", "-n", "2", release=release)
    deadline = time.monotonic() + 120
    while len(list((tmp_path / "held").iterdir())) < 2 and time.monotonic() < deadline:
        assert held.poll() is None, held.communicate()[0]
        time.sleep(0.1)
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    killed = TEMPORARY / f"{finished.stdout.strip()}-killed"  # a run that never removed it
    killed.mkdir()
    # pytest's shared folder keeps the last three runs' folders: three more runs.
    others = [tmp_path / f"other{n}" for n in range(3)]
    for run in [inner_run(told) for told in others]:
        ended(run)
    release.touch()
    ended(held)  # its files were all there when it was released

    workers = told_bases(tmp_path / "held")
    assert {base.name for base in workers} == {"popen-gw0", "popen-gw1"}
    (held_folder,) = {base.parent for base in workers}  # one folder for the run
    folders = [held_folder, *(base for told in others for base in told_bases(told))]
    assert len(set(folders)) == 4
    assert all(folder.parent == TEMPORARY for folder in folders)
    # Not pytest's shared folder, whose last three runs' folders a run beside would delete
    # (the clone itself may be under the system's temporary folder).
    shared = (Path(tempfile.gettempdir()) / f"pytest-of-{getpass.getuser()}").resolve()
    assert not any(folder.resolve().is_relative_to(shared) for folder in folders)
    assert [folder for folder in folders if folder.exists()] == []  # each run removed its own
    assert not killed.exists()  # and the next removed a dead run's


def test_this_run_has_a_folder_of_its_own(tmp_path_factory):
    """This run too, whether on xdist's workers (`make test`) or not."""
    base = tmp_path_factory.getbasetemp()
    run = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    assert run.parent == TEMPORARY
