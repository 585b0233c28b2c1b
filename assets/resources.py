"""The Dagster resources: each service's settings (`pipelines/clients/`) and the lake's
location (`pipelines/lake/__init__.py`) as configurable resources, built from `Settings`. A
connection names the variable that holds its key (`Connection.api_key_env`), read when a
transport opens: Dagster stores the variable's name, never the key, and a missing key fails
its own connection, not every resource."""

from __future__ import annotations

import dagster as dg

from assets.failures import failure
from pipelines.clients.base import Connection
from pipelines.clients.comment import CommentAutomation
from pipelines.clients.conversation import ConversationService
from pipelines.clients.datahub import DataHub
from pipelines.errors import SetupError, SyncError
from pipelines.lake import Lake, LakeLocation
from pipelines.settings import Settings, lake_location, load_settings, service_settings


class LakeResource(dg.ConfigurableResource, LakeLocation):
    """The lake and the warehouse, as every asset, check and job reads them."""

    def lake(self) -> Lake:
        try:
            return super().lake()
        except SyncError as problem:
            # A wrong LAKE_ROOT or store setting, or the store out of reach: the step fails
            # saying what to fix, as the command line does, not with a traceback.
            raise failure(problem) from None


class ConnectionConfig(dg.Config, Connection):
    """A connection as Dagster configures it: the name of the variable holding its key."""


class CommentAutomationResource(dg.ConfigurableResource, CommentAutomation):
    connections: list[ConnectionConfig]


class ConversationResource(dg.ConfigurableResource, ConversationService):
    connections: list[ConnectionConfig]


class DataHubResource(dg.ConfigurableResource, DataHub):
    connections: list[ConnectionConfig]


RESOURCE_CLASSES: dict[str, type[dg.ConfigurableResource]] = {
    "comment": CommentAutomationResource,
    "conversation": ConversationResource,
    "datahub": DataHubResource,
}


def build_resources(settings: Settings) -> dict[str, dg.ConfigurableResource]:
    """The lake's and every service's resource, of the same settings as the core's
    (`pipelines/settings.py`, `services` and `lake_location`)."""
    resources: dict[str, dg.ConfigurableResource] = {
        "lake": LakeResource(**lake_location(settings).model_dump())
    }
    for service, resource_class in RESOURCE_CLASSES.items():
        resources[service] = resource_class(
            **service_settings(settings, service, connection=ConnectionConfig)
        )
    return resources


class SetupProblem(dg.ConfigurableResource):
    """Stands in for every resource when the settings are wrong (`pipelines/settings.py`), so
    the code location still loads and each run fails at its start with what to fix, instead
    of the UI showing a location that cannot load."""

    problem: str

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        raise failure(SetupError(self.problem))


def resources_or_problem() -> dict[str, dg.ConfigurableResource]:
    """`build_resources` of the settings, or, when they are wrong, `SetupProblem`s."""
    try:
        return build_resources(load_settings())
    except SetupError as mistake:
        problem = SetupProblem(problem=f"the settings are wrong: {mistake}")
        return {key: problem for key in ("lake", *RESOURCE_CLASSES)}
