"""The conversation service's streams: what lands in the lake, and how.

The clients' models (`pipelines/clients/conversation.py`) say what the service answers; each
stream is declared (a `PulledStream`, `pipelines/pull/landing.py`) beside what fetches it:
`directory.py` (channels, teams, users), `backups.py` (messages), `members.py` (members and
assignments). `checks.py` says what the checks compare; the assets
(`assets/conversation.py`) run them.
"""

from pipelines.pull.landing import PulledStream
from pipelines.streams.conversation.backups import MESSAGES
from pipelines.streams.conversation.directory import CHANNELS, TEAMS, USERS
from pipelines.streams.conversation.members import ASSIGNMENTS, MEMBERS

STREAMS: list[PulledStream] = [CHANNELS, TEAMS, USERS, MESSAGES, MEMBERS, ASSIGNMENTS]
