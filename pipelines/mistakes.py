"""A mistake a user can fix (a setting, a key, a URL), told so they can fix it: the message
names the service, the connection and the setting involved, never a secret, and says what to
do. The command line prints it without a traceback; Dagster shows it as the step's failure."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping

from pipelines.errors import SetupError

#: What a variable that holds a key may be called: a value outside this (a key pasted where
#: its variable's name belongs) is refused without being shown.
VARIABLE_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


#: A service key where the services document its form: comment automation's begin with
#: `sa_live_` (the others' keys have no documented form).
KEY_FORM = re.compile(r"sa_live_")
#: The settings that hold a path or an address, never a key.
PLACES = (
    "LAKE_ROOT",
    "WAREHOUSE_PATH",
    "WAREHOUSE_SQL",
    "SYNC_CONFIG",
    "SYNC_STORE",
    "SYNC_BUDGET_STORE",
    "PUSH_JOURNAL",
    "WEBHOOK_INBOX",
    "COMMENT_AUTOMATION_URL",
    "CONVERSATION_URL",
    "CONVERSATION_JP_URL",
    "DATAHUB_URL",
    "DATAHUB_JP_URL",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
)


def refuse_keys(env: Mapping[str, str]) -> None:
    """Refuse, without showing it, a service key put where a path or an address belongs:
    used as a folder name or a URL it would be written into files and messages."""
    for variable in PLACES:
        if KEY_FORM.search(env.get(variable, "")):
            raise SetupError(
                f"{variable} holds what looks like a comment automation key (it contains "
                "sa_live_): a key belongs in its own variable (COMMENT_AUTOMATION_API_KEY, or "
                f"the one a connection's api_key_env names); set {variable} to a path or an "
                "address"
            )


def closest(name: str, known: list[str]) -> str:
    """' (did you mean "x"?)' for the known name nearest `name`, or nothing."""
    match = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return f' (did you mean "{match[0]}"?)' if match else ""


def misnamed(names: list[str], known: list[str] | tuple[str, ...]) -> str:
    """Each of `names` that is not in `known`, quoted, with the closest known names (a typo's
    suggestion); empty when every name is known."""
    said = []
    for name in dict.fromkeys(names):
        if name not in known:
            close = difflib.get_close_matches(name, known, n=3)
            said.append(f"'{name}'" + (f" (did you mean {' or '.join(close)}?)" if close else ""))
    return ", ".join(said)
