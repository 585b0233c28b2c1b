"""The comment automation API (spec section 4) as a FastAPI app, one route per operation.

No `from __future__ import annotations` here: FastAPI must see the dependency aliases
defined inside `create_app` as objects, not as names it cannot resolve.
"""

from dataclasses import dataclass
from typing import Annotated, Literal
from uuid import UUID

from fastapi import Depends, FastAPI, Path, Query, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from sandbox.comment.data import BILLING_URL, DASHBOARD
from sandbox.comment.models import (
    AccountList,
    Activity,
    ActivityCreate,
    ActivityDetail,
    ActivityList,
    ActivityUpdate,
    Deleted,
    ErrorResponse,
    LogPage,
    PostList,
    Stats,
    Workspace,
)
from sandbox.comment.workspace import Workspace as WorkspaceData
from sandbox.comment.workspace import account_not_found
from sandbox.context import Sandbox
from sandbox.encoding import JSONResponse
from sandbox.errors import ApiError, not_found
from sandbox.service import bearer_key, service_app

RATE_LIMIT = 120  # requests per minute per key (spec section 8)
WRITE_SCOPE = "read+write"

_error = {"model": ErrorResponse}
# Spec section 4: every endpoint can return 400, 401, 403, 429; posts 502; /activities/{id} 404.
ERRORS = {400: _error, 401: _error, 403: _error, 429: _error}
POSTS_ERRORS = ERRORS | {502: _error}
ITEM_ERRORS = ERRORS | {404: _error}

_bearer = HTTPBearer(auto_error=False, description="workspace API key, `sa_live_…`")


@dataclass
class Caller:
    key: str
    scope: str
    workspace: WorkspaceData


def create_app(sandbox: Sandbox, workspaces: dict[str, WorkspaceData]) -> FastAPI:
    app = service_app("Comment Automation Service API (sandbox)")

    async def caller(
        request: Request,
        _: Annotated[HTTPAuthorizationCredentials | None, Security(_bearer)],
    ) -> Caller:
        key, workspace, scope = bearer_key(request)
        sandbox.rate_limit(("comment", key), RATE_LIMIT, header=False)
        data = workspaces[workspace]
        data.catch_up()
        return Caller(key, scope, data)

    async def subscribed(who: Annotated[Caller, Depends(caller)]) -> Caller:
        # Spec section 7: 403 trial_expired. GET /me stays readable to show the plan.
        if who.workspace.trial_expired():
            raise ApiError(
                403,
                "trial_expired",
                "the trial of this workspace has ended",
                action_url=BILLING_URL,
            )
        return who

    async def writer(who: Annotated[Caller, Depends(subscribed)]) -> Caller:
        # Spec section 5 does not show which operations need write scope: every change does.
        if who.scope != WRITE_SCOPE:
            raise ApiError(
                403,
                "insufficient_scope",
                "this operation needs a read+write key",
                action_url=f"{DASHBOARD}/api-keys",
            )
        return who

    Anyone = Annotated[Caller, Depends(caller)]
    Reader = Annotated[Caller, Depends(subscribed)]
    Writer = Annotated[Caller, Depends(writer)]
    ItemId = Annotated[UUID, Path(description="activity id")]

    def activity_of(who: Caller, id: UUID):
        activity = who.workspace.activity(str(id))
        if activity is None:
            raise not_found("activity")
        return activity

    @app.get("/me", operation_id="get_me", response_model=Workspace, responses=ERRORS)
    async def get_me(who: Anyone) -> JSONResponse:
        return JSONResponse(who.workspace.me(who.key, who.scope))

    @app.get(
        "/accounts", operation_id="list_accounts", response_model=AccountList, responses=ERRORS
    )
    async def list_accounts(who: Reader) -> JSONResponse:
        return JSONResponse(who.workspace.account_list())

    @app.get(
        "/accounts/{id}/posts",
        operation_id="list_account_posts",
        response_model=PostList,
        responses=POSTS_ERRORS,
    )
    async def list_account_posts(
        who: Reader,
        id: Annotated[UUID, Path(description="account id")],
        kind: Literal["posts", "story"] = "posts",
    ) -> JSONResponse:
        account = who.workspace.account(str(id))
        if account is None:
            raise account_not_found("id")
        faults = sandbox.faults
        if faults is not None and faults.roll(faults.spec.posts_502):
            raise ApiError(
                502,
                "platform_error",
                f"the {account.platform} API failed to list recent posts; try again",
            )
        return JSONResponse({"posts": who.workspace.recent_posts(account, kind)})

    @app.get(
        "/activities", operation_id="list_activities", response_model=ActivityList, responses=ERRORS
    )
    async def list_activities(
        who: Reader,
        status: Literal["draft", "active", "paused"] | None = None,
        account_id: str | None = None,
    ) -> JSONResponse:
        return JSONResponse(who.workspace.activity_list(status, account_id))

    @app.post(
        "/activities",
        operation_id="create_activity",
        response_model=Activity,
        status_code=201,
        responses=ERRORS,
    )
    async def create_activity(who: Writer, body: ActivityCreate) -> JSONResponse:
        return JSONResponse(who.workspace.create_activity(body), status_code=201)

    @app.get(
        "/activities/{id}",
        operation_id="get_activity",
        response_model=ActivityDetail,
        responses=ITEM_ERRORS,
    )
    async def get_activity(who: Reader, id: ItemId) -> JSONResponse:
        return JSONResponse(who.workspace.activity_detail(activity_of(who, id)))

    @app.patch(
        "/activities/{id}",
        operation_id="update_activity",
        response_model=Activity,
        responses=ITEM_ERRORS,
    )
    async def update_activity(who: Writer, id: ItemId, body: ActivityUpdate) -> JSONResponse:
        return JSONResponse(who.workspace.update_activity(activity_of(who, id), body))

    @app.delete(
        "/activities/{id}",
        operation_id="delete_activity",
        response_model=Deleted,
        responses=ITEM_ERRORS,
    )
    async def delete_activity(who: Writer, id: ItemId) -> JSONResponse:
        return JSONResponse(who.workspace.delete_activity(activity_of(who, id)))

    @app.get("/logs", operation_id="list_logs", response_model=LogPage, responses=ERRORS)
    async def list_logs(
        who: Reader,
        activity_id: str | None = None,
        account_id: str | None = None,
        status: Literal["success", "failed"] | None = None,
        days: Annotated[int | None, Query(ge=1, le=365)] = None,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        page: Annotated[int, Query(ge=0)] = 0,
    ) -> JSONResponse:
        return JSONResponse(
            who.workspace.log_page(
                activity_id=activity_id,
                account_id=account_id,
                status=status,
                days=days,
                limit=limit,
                page=page,
            )
        )

    @app.get("/stats", operation_id="get_stats", response_model=Stats, responses=ERRORS)
    async def get_stats(who: Reader, days: Annotated[int, Query(ge=1, le=90)] = 7) -> JSONResponse:
        return JSONResponse(who.workspace.stats(days))

    return app
