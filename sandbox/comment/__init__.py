"""Comment automation service (spec: comment-automation-api.md), one deployment.

Each workspace of `sandbox.context.COMMENT_KEYS` ("demo", "agency") holds its own data;
the ground truth is keyed by workspace id, as `GET /me` returns it.
"""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, HTTPException

from sandbox.comment.data import epoch
from sandbox.comment.routes import create_app
from sandbox.comment.workspace import Workspace
from sandbox.context import COMMENT_KEYS, Sandbox
from sandbox.encoding import JSONResponse


class CommentService:
    service = "comment"

    def __init__(self, sandbox: Sandbox, region: str = "default") -> None:
        self.region = region
        names = dict.fromkeys(workspace for workspace, _ in COMMENT_KEYS.values())
        self.workspaces = {name: Workspace(sandbox, name) for name in names}
        self.app = create_app(sandbox, self.workspaces)
        self.admin = APIRouter(tags=["sandbox"])
        self.admin.add_api_route("/logs/shift", self._shift_logs, methods=["POST"])

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

    def _shift_logs(
        self,
        seconds: int,
        start: datetime | None = None,
        end: datetime | None = None,
    ) -> JSONResponse:
        """Sandbox only: every workspace's logs created in [`start`, `end`) move by `seconds`,
        their ids kept, as a sandbox started again with another `--now` serves them. Answers
        `{moved: {workspace id: logs}}`; 400 if a log would move past now."""
        if any(at is not None and at.tzinfo is None for at in (start, end)):
            raise HTTPException(400, "start and end need a timezone")
        bounds = (epoch(start) if start else 0, epoch(end) if end else 2**62)
        try:
            moved = {w.id: w.shift_logs(seconds, *bounds) for w in self.workspaces.values()}
        except ValueError as refused:
            raise HTTPException(400, str(refused)) from None
        return JSONResponse({"moved": moved})

    def _workspace(self, scope: str) -> Workspace:
        for workspace in self.workspaces.values():
            if workspace.id == scope:
                return workspace
        raise KeyError(scope)


def build(sandbox: Sandbox, region: str = "default") -> CommentService:
    return CommentService(sandbox, region)
