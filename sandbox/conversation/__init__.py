"""PLACEHOLDER until the conversation service lands (being written now)."""

from fastapi import APIRouter, FastAPI


class _Placeholder:
    service = "conversation"

    def __init__(self, region: str) -> None:
        self.region = region
        self.app = FastAPI(openapi_url="/openapi.json")
        self.admin = APIRouter()

    def truth(self) -> dict:
        return {}

    def truth_ids(self, scope: str, stream: str) -> list:
        raise KeyError(stream)


def build(sandbox, region: str = "default"):
    return _Placeholder(region)
