"""PLACEHOLDER until the data hub records land (being written now)."""

from fastapi import APIRouter


class RecordStore:
    def __init__(self, sandbox, region: str) -> None:
        self.region = region

    def current(self, record_type: str, key: str) -> dict | None:
        return None


def records_router(store: RecordStore) -> APIRouter:
    return APIRouter()
