"""The product's errors are one tree (`pipelines/errors.py`): every exception class of
`pipelines/` and `assets/` descends from `SyncError`, and each has the exit code its branch
declares, which docs/running.md lists. A class added outside the tree, or a branch added
without a code, fails here."""

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import assets
import pipelines
from pipelines.errors import SetupError, SyncError

DOCS = Path(__file__).resolve().parent.parent / "docs" / "running.md"


def product_exceptions() -> list[type[BaseException]]:
    """Every exception class defined in a module of the product (the launchers left out:
    importing one runs its command)."""
    found = []
    for package in (pipelines, assets):
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if module.name.rsplit(".", 1)[-1] == "__main__":
                continue
            loaded = importlib.import_module(module.name)
            found += [
                value
                for value in vars(loaded).values()
                if inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.name
            ]
    return found


def branch(error: type[SyncError]) -> type[SyncError]:
    """The class of `error`'s ancestry that stands directly under `SyncError`."""
    return next(cls for cls in error.__mro__ if SyncError in cls.__bases__)


def declared_code(error: type[SyncError]) -> int | None:
    """The exit code `error`'s branch declares itself, None where it declares none."""
    return vars(branch(error)).get("exit_code")


EXCEPTIONS = product_exceptions()
BRANCHES = sorted({branch(e) for e in EXCEPTIONS if e is not SyncError}, key=lambda b: b.__name__)


def test_the_walk_finds_the_products_errors():
    names = {e.__name__ for e in EXCEPTIONS}
    assert {"SetupError", "PushBusy", "StoreUnavailable", "LakeUnavailable", "NotARequest"} <= names
    assert len(BRANCHES) == 7


@pytest.mark.parametrize("error", EXCEPTIONS, ids=lambda e: f"{e.__module__}.{e.__name__}")
def test_every_error_of_the_product_has_its_branchs_exit_code(error):
    assert issubclass(error, SyncError), f"{error.__name__} is outside pipelines/errors.py's tree"
    if error is SyncError:
        assert not hasattr(error, "exit_code")  # only a branch says what a failure means
        return
    code = declared_code(error)
    assert isinstance(code, int) and code in (1, 2, 3, 4), f"{branch(error).__name__}: {code}"
    assert error.exit_code == code  # nothing below a branch says otherwise


def test_a_class_without_a_code_of_its_branch_is_found():
    class Unbranched(SyncError):
        pass

    class Told(Unbranched, SetupError):  # the first branch of its ancestry counts
        pass

    assert declared_code(Unbranched) is None and declared_code(Told) is None
    assert declared_code(type("Mistake", (SetupError,), {})) == 2


@pytest.mark.parametrize("error", BRANCHES, ids=lambda b: b.__name__)
def test_docs_running_lists_each_branch_with_its_code(error):
    rows = [line for line in DOCS.read_text().splitlines() if f"`{error.__name__}`" in line]
    assert [row for row in rows if re.match(rf"\| {error.exit_code} \|", row)], rows


def test_the_outages_are_not_settings():
    """Regression: they sat under SetupError, so a store gone mid-run exited 2."""
    from pipelines.errors import Unavailable
    from pipelines.lake.object_store import LakeUnavailable
    from pipelines.state.budget import BudgetUnavailable
    from pipelines.state.shared_store import StoreUnavailable

    for outage in (LakeUnavailable, StoreUnavailable, BudgetUnavailable):
        assert branch(outage) is Unavailable and outage.exit_code == 1
