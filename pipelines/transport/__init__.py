from pipelines.transport.client import Transport
from pipelines.transport.decoding import TruncatedBody, whole_json
from pipelines.transport.pacing import Pacer, Rate, key_id
from pipelines.transport.refusals import ServiceError
from pipelines.transport.retries import MIN_WAIT, RetryPolicy
from pipelines.transport.stats import CallStats

__all__ = [
    "MIN_WAIT",
    "CallStats",
    "Pacer",
    "Rate",
    "RetryPolicy",
    "ServiceError",
    "Transport",
    "TruncatedBody",
    "key_id",
    "whole_json",
]
