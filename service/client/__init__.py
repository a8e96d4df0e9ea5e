"""Python client of the Ridgeline API: ``Ridgeline`` (blocking) and ``AsyncRidgeline``.

Both retry 429 and 503 answers (and connection errors of idempotent calls) honouring
``Retry-After``, and raise ``RidgelineError`` subclasses carrying the RFC 9457 problem details.
"""

from service.api.schemas.accelerators import Accelerator
from service.api.schemas.analysis import (
    EstimateRequest,
    EstimateResponse,
    IntensityRequest,
    IntensityResponse,
    PointOut,
)
from service.api.schemas.models import Model
from service.api.schemas.planning import PlanRequest, PlanResponse, WorkloadOut
from service.api.schemas.traffic import (
    ArrivalIn,
    LengthDistributionIn,
    PlanTrafficIn,
    TrafficIn,
    TrafficOut,
    TrafficSloIn,
)
from service.client.aio import AsyncRidgeline
from service.client.errors import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    PreconditionFailedError,
    RateLimitError,
    RidgelineConnectionError,
    RidgelineError,
    RidgelineTimeoutError,
    ServerError,
    ServiceUnavailableError,
)
from service.client.retry import RetryPolicy, parse_retry_after
from service.client.sync import Ridgeline
from service.client.types import CalibrationProfile

__all__ = [
    "Accelerator",
    "ArrivalIn",
    "AsyncRidgeline",
    "AuthenticationError",
    "BadRequestError",
    "CalibrationProfile",
    "ConflictError",
    "EstimateRequest",
    "EstimateResponse",
    "IntensityRequest",
    "IntensityResponse",
    "InvalidRequestError",
    "LengthDistributionIn",
    "Model",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "PlanRequest",
    "PlanResponse",
    "PlanTrafficIn",
    "PointOut",
    "PreconditionFailedError",
    "RateLimitError",
    "RetryPolicy",
    "Ridgeline",
    "RidgelineConnectionError",
    "RidgelineError",
    "RidgelineTimeoutError",
    "ServerError",
    "ServiceUnavailableError",
    "TrafficIn",
    "TrafficOut",
    "TrafficSloIn",
    "WorkloadOut",
    "parse_retry_after",
]
