"""Asynchronous client: ``AsyncRidgeline``."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import httpx

from service.api.schemas.accelerators import Accelerator
from service.api.schemas.analysis import (
    EstimateRequest,
    EstimateResponse,
    IntensityRequest,
    IntensityResponse,
)
from service.api.schemas.models import Model
from service.api.schemas.planning import PlanRequest, PlanResponse, WorkloadOut
from service.client import calls
from service.client.calls import Body, Call, ChartFormat, ChartKind, Paged
from service.client.core import ClientCore, Done, Wait, resolve_api_key, resolve_base_url
from service.client.errors import RidgelineError
from service.client.measurement_files import Progress, as_paths, calibration_from_file
from service.client.retry import RetryPolicy
from service.client.types import CalibrationProfile

T = TypeVar("T")


class AsyncRidgeline:
    """Asyncio client of the Ridgeline API with retries on 429/503 and typed results."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 10.0,
        max_retries: int = 3,
        transport: httpx.AsyncBaseTransport | None = None,
        *,
        http_client: httpx.AsyncClient | None = None,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        policy = retry or RetryPolicy(max_retries=max_retries)
        self._core = ClientCore(resolve_api_key(api_key), timeout_s, policy, jitter)
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient(
            base_url=resolve_base_url(base_url), transport=transport, timeout=timeout_s
        )
        self._sleep = sleep

    async def aclose(self) -> None:
        """Close the HTTP connections (only those this client opened)."""
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncRidgeline:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _run(self, call: Call[T]) -> T:
        step: Done[T] | Wait
        for attempt in itertools.count():
            try:
                response = await self._http.send(self._core.request(self._http, call))
            except httpx.TransportError as exc:
                step = self._core.after_error(call, attempt, exc)
            else:
                step = self._core.after_response(call, attempt, response)
            if isinstance(step, Done):
                return step.value
            await self._sleep(step.delay_s)
        raise AssertionError("unreachable")

    async def _iterate(self, paged: Paged[T]) -> AsyncIterator[T]:
        cursor: str | None = None
        while True:
            items, cursor = await self._run(paged.page(cursor))
            for item in items:
                yield item
            if not cursor:
                return

    # Catalog ----------------------------------------------------------------------------------

    def list_accelerators(
        self, *, limit: int | None = None, **filters: Any
    ) -> AsyncIterator[Accelerator]:
        """Iterate over all accelerators (filters: vendor, min_memory_gb, dtype), page by page."""
        return self._iterate(calls.list_accelerators(limit, filters))

    async def get_accelerator(self, accelerator_id: str) -> Accelerator:
        """Return one accelerator."""
        return await self._run(calls.get_accelerator(accelerator_id))

    async def create_accelerator(self, body: Body | None = None, /, **fields: Any) -> Accelerator:
        """Add an accelerator (API key with write scope)."""
        return await self._run(calls.create_accelerator(body, fields))

    async def update_accelerator(
        self,
        accelerator_id: str,
        body: Body | None = None,
        /,
        *,
        replace: bool = False,
        if_match: str | None = None,
        **fields: Any,
    ) -> Accelerator:
        """Merge-patch an accelerator, or replace all its fields with ``replace=True``."""
        call = calls.update_accelerator(
            accelerator_id, body, fields, replace=replace, if_match=if_match
        )
        return await self._run(call)

    async def delete_accelerator(self, accelerator_id: str, *, if_match: str | None = None) -> None:
        """Delete an accelerator."""
        await self._run(calls.delete_accelerator(accelerator_id, if_match))

    def list_models(self, *, limit: int | None = None, **filters: Any) -> AsyncIterator[Model]:
        """Iterate over all models (filters: family, moe), page by page."""
        return self._iterate(calls.list_models(limit, filters))

    async def get_model(self, model_id: str) -> Model:
        """Return one model."""
        return await self._run(calls.get_model(model_id))

    async def create_model(self, body: Body | None = None, /, **fields: Any) -> Model:
        """Add a model shape (API key with write scope)."""
        return await self._run(calls.create_model(body, fields))

    async def update_model(
        self,
        model_id: str,
        body: Body | None = None,
        /,
        *,
        replace: bool = False,
        if_match: str | None = None,
        **fields: Any,
    ) -> Model:
        """Merge-patch a model, or replace all its fields with ``replace=True``."""
        return await self._run(
            calls.update_model(model_id, body, fields, replace=replace, if_match=if_match)
        )

    async def delete_model(self, model_id: str, *, if_match: str | None = None) -> None:
        """Delete a model."""
        await self._run(calls.delete_model(model_id, if_match))

    async def import_hf(self, model_id: str, hf_config: Mapping[str, Any], **fields: Any) -> Model:
        """Create a model from a Hugging Face config.json (fields: name, hf_repo, sources)."""
        return await self._run(calls.import_hf_model(model_id, hf_config, fields))

    # Analysis and planning --------------------------------------------------------------------

    async def intensity(
        self, body: IntensityRequest | Body | None = None, /, **fields: Any
    ) -> IntensityResponse:
        """Per-operator FLOPs, bytes and arithmetic intensity (POST /v1/intensity)."""
        return await self._run(calls.intensity(body, fields))

    async def estimate(
        self, body: EstimateRequest | Body | None = None, /, **fields: Any
    ) -> EstimateResponse:
        """Latency, throughput, memory and cost per batch size (POST /v1/estimates)."""
        return await self._run(calls.estimate(body, fields))

    async def estimate_batch(
        self, requests: Sequence[EstimateRequest | Body]
    ) -> list[EstimateResponse | RidgelineError]:
        """Up to 256 estimates in one call; a failed item is returned as its error."""
        return await self._run(calls.estimate_batch(requests))

    async def plan(self, body: PlanRequest | Body | None = None, /, **fields: Any) -> PlanResponse:
        """Ranked deployment configurations meeting the SLO (POST /v1/plans)."""
        return await self._run(calls.plan(body, fields))

    async def workloads(self) -> list[WorkloadOut]:
        """Workload presets (chat, code-completion, ...)."""
        return await self._run(calls.workloads())

    # Calibration ------------------------------------------------------------------------------

    async def calibrate(self, body: Body | None = None, /, **fields: Any) -> CalibrationProfile:
        """Fit and store a calibration profile from JSON measurements."""
        return await self._run(calls.calibrate(body, fields))

    async def calibrate_per_backend(
        self, body: Body | None = None, /, **fields: Any
    ) -> list[CalibrationProfile]:
        """Fit and store one profile per backend that the measurements' runs name."""
        return await self._run(calls.calibrate_per_backend(body, fields))

    async def calibrate_file(
        self,
        path: str | Path | Sequence[str | Path],
        *,
        accelerator: str,
        name: str | None = None,
        progress: Progress | None = None,
        tp: int = 1,
        weights_dtype: str = "bf16",
        model: str = "",
        concurrency: int | None = None,
        file_format: str | None = None,
        **fields: Any,
    ) -> CalibrationProfile:
        """Fit a profile from a benchmark CSV or a harness result file (vllm, SGLang,
        genai-perf, trtllm-bench, guidellm; docs/measurement-formats.md), or from several
        such files at once (kernel tables beside the runs: one profile)."""
        body = await asyncio.to_thread(
            calibration_from_file,
            as_paths(path),
            accelerator,
            name,
            progress,
            tp=tp,
            weights_dtype=weights_dtype,
            model=model,
            concurrency=concurrency,
            file_format=file_format,
        )
        return await self._run(calls.calibrate(body, fields))

    def list_calibrations(
        self, *, limit: int | None = None, **filters: Any
    ) -> AsyncIterator[CalibrationProfile]:
        """Iterate over calibration profiles (filter: accelerator)."""
        return self._iterate(calls.list_calibrations(limit, filters))

    async def get_calibration(self, calibration_id: str) -> CalibrationProfile:
        """Return one calibration profile."""
        return await self._run(calls.get_calibration(calibration_id))

    # Charts -----------------------------------------------------------------------------------

    async def chart(
        self, kind: ChartKind, chart_format: ChartFormat = "svg", **params: Any
    ) -> bytes:
        """A chart (roofline, sweep, frontier) as SVG, PNG or Vega-Lite JSON bytes."""
        return await self._run(calls.chart(kind, chart_format, params))
