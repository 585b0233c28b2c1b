"""The rules pipelines/activities/declared.py copies from the comment automation service
are the sandbox's (sandbox/comment/models.py), the ground truth: a file the client accepts is
one the service takes, and one it refuses is refused for the service's reason."""

from typing import get_args

import pytest

from pipelines.activities import declared
from sandbox.comment import models

COPIED = [
    "NO_PUBLIC_REPLIES",
    "NO_DM",
    "NEXT_POST_TRIGGERS",
    "FOLLOW_GATE_TRIGGERS",
    "DM_TEXT_MAX",
    "DM_TEXT_MAX_WITH_BUTTONS",
    "DM_BUTTONS_MAX",
    "CARDS_MAX",
    "BUTTON_TITLE_MAX",
    "SHARE_PAGE_HOSTS",
    "BLOCK_FIELDS",
    "BLOCK_REQUIRED",
]


@pytest.mark.parametrize("name", COPIED)
def test_a_rule_copied_from_the_sandbox_agrees_with_it(name):
    assert getattr(declared, name) == getattr(models, name)


def test_the_triggers_are_the_sandboxs():
    assert get_args(declared.Trigger) == get_args(models.Trigger)
