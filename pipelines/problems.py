"""A mistake a user can fix (a setting, a key, a URL), told so they can fix it: the message
names the service, the connection and the setting involved, never a secret, and says what to
do. The command line prints it without a traceback; Dagster shows it as the step's failure."""

from __future__ import annotations

import difflib
import re

#: What a variable that holds a key may be called: a value outside this (a key pasted where
#: its variable's name belongs) is refused without being shown.
VARIABLE_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


class SetupError(Exception):
    """A setting that cannot work, with all there is to say in its message."""


def closest(name: str, known: list[str]) -> str:
    """' (did you mean "x"?)' for the known name nearest `name`, or nothing."""
    match = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return f' (did you mean "{match[0]}"?)' if match else ""
