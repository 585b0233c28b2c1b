"""Run by `tests/test_temporary_folders.py` as a pytest of its own (its name keeps the suite
from collecting it): each test writes where its run's base folder is and keeps a file there,
held until the file `PROBE_RELEASE` names exists, then asserts the file is still there."""

import os
import time
from pathlib import Path

import pytest


@pytest.mark.parametrize("test", ["one", "two"])  # two, so that each of two workers has one
def test_keeps_a_file(test, tmp_path_factory, tmp_path):
    told = Path(os.environ["PROBE_TOLD"]) / test
    told.write_text(str(tmp_path_factory.getbasetemp()))
    kept = tmp_path / "kept"
    kept.write_text(test)
    release = Path(os.environ.get("PROBE_RELEASE", told))
    deadline = time.monotonic() + 120
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert kept.read_text() == test
