"""`python -m cli push` on a terminal draws a live table, a row per record type
(`cli/live.py`, from `pipelines/push/progress.py`: phase, keys planned of those handed,
rows rejected, to send, accepted, refused, requests, time), and ends with its figures' table;
in a pipe it prints a plain line per record type as it ends, and the table, with no control
sequence."""

import re
import subprocess
import sys

from pipelines.push.plan import OUTCOMES
from tests.pipelines.test_progress_display import CONTROL, environment, held, on_a_terminal
from tests.push.test_push import held_as_expected, pushable, submissions_of

#: What the tests push: coupons first, then orders (`OUTBOUND`'s order).
TYPES = ("coupon", "order")
COMMAND = [sys.executable, "-m", "cli", "push", "--types", *TYPES]
#: Where the sandbox takes orders.
ORDERS = "/datahub/v1/records/order"
#: A row of the live table: the record type, its phase, keys planned/handed, then rejected,
#: to send, accepted, refused and requests.
ROW = r"{}\s+{}\s+([\d,]+)/([\d,]+)\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)\s+([\d,]+)"


def numbers(found: tuple[str, ...]) -> list[int]:
    return [int(n.replace(",", "")) for n in found]


def test_a_push_on_a_terminal_shows_each_record_type_live_and_ends_with_its_table(
    start_sandbox, sync_env
):
    sandbox = start_sandbox()
    resources = pushable(sandbox, sync_env)
    sending = re.compile(ROW.format("order", "sending"))
    seen: list[str] = []

    with held(sandbox, ORDERS) as release:

        def watch(written: str) -> None:
            # The frame that shows the orders sent and none answered yet, the coupons done
            # above them: then the sandbox answers.
            if not seen and sending.search(CONTROL.sub("", written)):
                seen.append(CONTROL.sub("", written))
                release.set()

        code, screen = on_a_terminal(COMMAND, watch)

    assert code == 0, screen
    assert seen, screen  # a frame drawn while the orders were being sent
    [*_, held_frame] = re.finditer(
        ROW.format("coupon", "done") + r"\s+done in [^\n]*\n\s*" + ROW.format("order", "sending"),
        seen[0],
    )
    order_then = numbers(held_frame.groups()[7:])
    planned, handed, _, to_send, accepted, refused, _ = order_then
    assert planned <= handed and to_send > 0 and (accepted, refused) == (0, 0)

    plain = CONTROL.sub("", screen)
    header = r"record type\s+phase\s+keys\s+rejected\s+to send\s+accepted\s+refused\s+requests"
    assert re.search(header + r"\s+time", plain), plain
    # The last frame: every key planned, the sandbox's orders accepted, one request each.
    finals = re.findall(ROW.format("order", "done") + r"\s+done in", plain)
    assert finals, plain
    planned, handed, rejected, to_send, accepted, refused, requests = numbers(finals[-1])
    orders = held_as_expected(sandbox, resources, "order")
    assert planned == handed > 0 and rejected > 0  # the shop's planted invalid rows
    assert accepted == to_send == len(orders) and refused == 0
    assert requests == submissions_of("order")(sandbox)
    # The product's lines print above the table, and the figures' table after it, once.
    assert re.search(rf"push order: {handed:,} key\(s\) planned, {accepted:,} row\(s\) sent", plain)
    figures = re.search(r"^record type\s+new\s+changed", plain, re.MULTILINE)
    assert figures and plain.rindex("done in") < figures.start(), plain
    [row] = [line.split() for line in plain[figures.start() :].splitlines() if line[:6] == "order "]
    columns = [*OUTCOMES, "sent", "refused"]
    assert numbers(tuple(row[1:]))[columns.index("sent")] == len(orders)


def test_a_push_in_a_pipe_prints_a_plain_line_per_record_type_and_its_table(
    start_sandbox, sync_env
):
    sandbox = start_sandbox()
    resources = pushable(sandbox, sync_env)

    done = subprocess.run(COMMAND, capture_output=True, text=True, env=environment(), timeout=300)

    assert done.returncode == 0, done.stderr
    assert "\x1b" not in done.stdout + done.stderr
    assert "accepted" not in done.stderr  # no live table
    lines = [line for line in done.stderr.splitlines() if line.startswith("push ")]
    line = (
        r"push {}: ([\d,]+) key\(s\) planned, ([\d,]+) row\(s\) sent in ([\d,]+) "
        r"request\(s\); done in \d+m \d\ds"
    )
    said = [
        re.fullmatch(line.format(record_type), text)
        for record_type, text in zip(TYPES, lines, strict=True)
    ]
    assert all(said), lines
    for record_type, found in zip(TYPES, said, strict=True):
        keys, sent, requests = numbers(found.groups())
        stored = held_as_expected(sandbox, resources, record_type)
        assert keys > 0 and sent == len(stored) and requests == submissions_of(record_type)(sandbox)
    # The figures, once: the table's row of each record type, under a column per figure.
    [header] = [line for line in done.stdout.splitlines() if line.startswith("record type")]
    assert header.split() == ["record", "type", *OUTCOMES, "sent", "refused"]
    for record_type in TYPES:
        rows = [
            line
            for line in (done.stdout + done.stderr).splitlines()
            if line.split()[:1] == [record_type]
        ]
        assert len(rows) == 1, rows
