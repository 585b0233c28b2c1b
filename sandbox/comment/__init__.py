"""Comment automation service (spec: comment-automation-api.md), one deployment.

Each workspace of `sandbox.context.COMMENT_KEYS` ("demo", "agency") holds its own data;
the ground truth is keyed by workspace id, as `GET /me` returns it.
"""

from __future__ import annotations

from fastapi import APIRouter

from sandbox.comment.routes import create_app
from sandbox.comment.workspace import Workspace
from sandbox.context import COMMENT_KEYS, Sandbox


class CommentService:
    service = "comment"

    def __init__(self, sandbox: Sandbox, region: str = "default") -> None:
        self.region = region
        names = dict.fromkeys(workspace for workspace, _ in COMMENT_KEYS.values())
        self.workspaces = {name: Workspace(sandbox, name) for name in names}
        self.app = create_app(sandbox, self.workspaces)
        self.admin = APIRouter()

    def catch_up(self) -> None:
        for workspace in self.workspaces.values():
            workspace.catch_up()

    def truth(self) -> dict[str, dict[str, int]]:
        return {w.id: w.truth_counts() for w in self.workspaces.values()}

    def truth_ids(self, scope: str, stream: str) -> list:
        return self._workspace(scope).truth_ids(stream)

    def truth_days(self, scope: str, stream: str) -> dict[str, int]:
        return self._workspace(scope).truth_days(stream)

    def truth_rows(self, scope: str, stream: str) -> list[dict]:
        return self._workspace(scope).truth_rows(stream)

    def _workspace(self, scope: str) -> Workspace:
        for workspace in self.workspaces.values():
            if workspace.id == scope:
                return workspace
        raise KeyError(scope)


def build(sandbox: Sandbox, region: str = "default") -> CommentService:
    return CommentService(sandbox, region)
