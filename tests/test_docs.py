"""What the docs show of the code is the code: the stream docs/development.md walks through
is the one `pipelines/streams/comment/snapshots.py` declares, word for word."""

import re
from pathlib import Path

from pipelines.pull.landing import PulledStream
from pipelines.streams.comment import ACCOUNTS, STREAMS

ROOT = Path(__file__).resolve().parent.parent


def test_adding_a_stream_shows_a_real_declaration_as_it_is():
    guide = (ROOT / "docs" / "development.md").read_text()
    section = guide[guide.index("### Adding a stream") :]
    (shown,) = re.findall(r"```python\n(.*?)```", section, re.S)
    source = (ROOT / "pipelines" / "streams" / "comment" / "snapshots.py").read_text()
    assert shown in source
    assert isinstance(ACCOUNTS, PulledStream) and ACCOUNTS in STREAMS
    for named in re.findall(r"`((?:pipelines|tests)/[\w/]+\.py)`", section):
        assert (ROOT / named).is_file(), named
