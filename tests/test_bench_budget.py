"""The figures of `python -m bench.budget --backfill` (bench/budget.py): the budget used while
a request waited for its slot, which a pause of every process does not lower and a slot left
idle while a request waits does."""

from __future__ import annotations

from bench.budget import PER_SECOND, budget_figures, timeline

#: The pacer's spacing at 120 per 10 s less its 2 % headroom (pipelines/transport/pacing.py).
SLOT = 1.02 / PER_SECOND


def paced(count: int, start: float = 0.0) -> list[tuple[float, float, int]]:
    """`count` requests on consecutive slots from `start`, each asked four slots before its
    own (four in flight, as a read-ahead holds them), none before `start`."""
    return [(max(start, start + (n - 4) * SLOT), start + n * SLOT, 200) for n in range(count)]


def test_a_saturated_key_uses_the_budget_less_the_pacers_headroom():
    figures = budget_figures([paced(600)])
    assert 97.5 < figures["used while wanted %"] < 98.5
    assert 97.5 < figures["used over the run %"] < 98.5
    assert figures["429s"] == 0


def test_a_pause_in_which_nobody_asks_lowers_the_run_not_the_budget_while_wanted():
    """A minute with no process asking (starting, recording its run): the issue's figure
    over the run falls; the budget was not what anyone waited for."""
    first = paced(300)
    later = paced(300, start=first[-1][1] + 60.0)
    figures = budget_figures([first, later])
    assert figures["used over the run %"] < 60
    assert figures["used while wanted %"] > 95


def test_a_slot_left_idle_while_a_request_waits_lowers_the_budget_while_wanted():
    """The same pause, with a request waiting through it for a slot nobody used."""
    first = paced(300)
    later = paced(300, start=first[-1][1] + 60.0)
    later[0] = (first[-1][1], later[0][1], 200)
    figures = budget_figures([first, later])
    assert figures["used while wanted %"] < 60


def test_the_timeline_counts_each_process_and_429s_per_window():
    one = paced(240)
    two = [(a, s, 429 if n == 5 else 200) for n, (a, s, _) in enumerate(paced(10, start=3.0))]
    rows = timeline("t", [one, two])
    assert [row["from s"] for row in rows] == [0, 10, 20]
    assert rows[0]["p1"] == 10 and rows[0]["429s"] == 1
    assert sum(row["p0"] for row in rows) == 240
    assert sum(row["all"] for row in rows) == 250
