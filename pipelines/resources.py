"""Build the Dagster resources from `Settings`: keys enter only as `dg.EnvVar`."""

from __future__ import annotations

import dagster as dg

from assets.landing import LakeResource
from pipelines.clients.base import Connection, ServiceResource
from pipelines.clients.comment import CommentAutomation
from pipelines.clients.conversation import ConversationService
from pipelines.clients.datahub import DataHub
from pipelines.settings import Settings

RESOURCE_CLASSES: dict[str, type[ServiceResource]] = {
    "comment": CommentAutomation,
    "conversation": ConversationService,
    "datahub": DataHub,
}


def build_resources(settings: Settings) -> dict[str, dg.ConfigurableResource]:
    resources: dict[str, dg.ConfigurableResource] = {
        "lake": LakeResource(
            lake_root=str(settings.lake_root),
            warehouse_path=str(settings.warehouse_path),
            warehouse_sql=[str(folder) for folder in settings.warehouse_sql],
        )
    }
    for service, resource_class in RESOURCE_CLASSES.items():
        options = dict(settings.service_options.get(service, {}))
        if service in settings.paths:
            options["paths"] = settings.paths[service]
        resources[service] = resource_class(
            connections=[
                Connection(name=c.name, base_url=c.base_url, api_key=dg.EnvVar(c.api_key_env))
                for c in settings.connections[service]
            ],
            **options,
        )
    return resources
