"""PLACEHOLDER until the data hub contacts land (being written now)."""

from fastapi import APIRouter


class ContactHub:
    def __init__(self, sandbox, region: str) -> None:
        self.region = region

    def truth(self) -> dict:
        return {}

    def truth_ids(self, stream: str) -> list:
        raise KeyError(stream)


def contacts_router(hub: ContactHub) -> APIRouter:
    return APIRouter()


def contacts_admin(hub: ContactHub) -> APIRouter:
    return APIRouter()
