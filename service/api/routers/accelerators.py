"""/v1/accelerators: list, read, create, replace, merge-patch and delete accelerators."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Body, Query, Request, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from service.api.deps import CatalogDep, ReadAccess, WriteAccess, read_catalog
from service.api.limits import problem_responses
from service.api.routers.conditional import (
    IfMatch,
    IfNoneMatch,
    check_body_id,
    merge_patch,
    merge_patch_model,
    representation_response,
    validate_as,
)
from service.api.schemas.accelerators import Accelerator, AcceleratorCreate, AcceleratorReplace
from service.api.schemas.common import Cursor, Dtype, ListPage, text_query
from service.services.catalog import read_accelerator

router = APIRouter(prefix="/v1/accelerators", tags=["catalog"])

READ_ONLY = ("origin", "version", "created_at", "updated_at", "ridge_point_flop_per_byte")
if TYPE_CHECKING:
    AcceleratorPatch = BaseModel
else:
    AcceleratorPatch = merge_patch_model(AcceleratorReplace, "AcceleratorPatch", ("id", *READ_ONLY))


@router.get("", response_model=ListPage[Accelerator], dependencies=[ReadAccess])
async def list_accelerators(
    request: Request,
    vendor: Annotated[str | None, text_query()] = None,
    min_memory_gb: Annotated[float | None, Query(ge=0)] = None,
    dtype: Dtype | None = Query(default=None, description="Only accelerators with a dense peak."),
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Cursor = None,
) -> dict[str, Any]:
    """List accelerators ordered by id, filtered and paginated by an opaque cursor."""
    page = await read_catalog(
        request,
        lambda catalog: catalog.list_accelerators(
            vendor=vendor, min_memory_gb=min_memory_gb, dtype=dtype, cursor=cursor, limit=limit
        ),
    )
    return {"items": page.items, "next_cursor": page.next_cursor}


@router.get("/{accelerator_id}", response_model=Accelerator, dependencies=[ReadAccess])
async def get_accelerator(
    accelerator_id: str, request: Request, if_none_match: IfNoneMatch = None
) -> Response:
    """Return one accelerator with a strong ETag (304 when If-None-Match matches)."""
    engine = request.app.state.engine
    representation = await run_in_threadpool(read_accelerator, engine, accelerator_id)
    return representation_response(representation, if_none_match=if_none_match)


@router.post(
    "",
    status_code=201,
    response_model=Accelerator,
    dependencies=[WriteAccess],
    responses=problem_responses(409),
)
def create_accelerator(body: AcceleratorCreate, catalog: CatalogDep) -> Response:
    """Add an accelerator (409 if the id exists).

    422 (not stated in the schema): a measured_matmul_tflops entry for a dtype peak_tflops
    lacks, or above the peak_tflops of its dtype.
    """
    created = catalog.create_accelerator(body.model_dump())
    return representation_response(
        created, status_code=201, location=f"/v1/accelerators/{created['id']}"
    )


@router.put("/{accelerator_id}", response_model=Accelerator, dependencies=[WriteAccess])
def replace_accelerator(
    accelerator_id: str, body: AcceleratorReplace, catalog: CatalogDep, if_match: IfMatch = None
) -> Response:
    """Replace an accelerator's fields (412 if If-Match is stale; 422 as for POST)."""
    check_body_id(accelerator_id, body.id)
    data = body.model_dump()
    return representation_response(
        catalog.replace_accelerator(accelerator_id, data, if_match=if_match)
    )


@router.patch("/{accelerator_id}", response_model=Accelerator, dependencies=[WriteAccess])
def patch_accelerator(
    accelerator_id: str,
    catalog: CatalogDep,
    body: Annotated[AcceleratorPatch, Body()],
    if_match: IfMatch = None,
) -> Response:
    """Merge-patch an accelerator (RFC 7396; 412 if If-Match is stale).

    The merged accelerator must be a valid POST /v1/accelerators body, else 422 naming the
    field (e.g. a measured_matmul_tflops for a dtype the stored peak_tflops lacks).
    """
    patch = body.model_dump(exclude_unset=True)
    current = catalog.get_accelerator(accelerator_id, for_update=True)
    editable = {k: v for k, v in current.items() if k not in READ_ONLY}
    check_body_id(accelerator_id, patch.get("id"))
    merged = validate_as(AcceleratorReplace, merge_patch(editable, patch))
    return representation_response(
        catalog.replace_accelerator(accelerator_id, merged, if_match=if_match)
    )


@router.delete("/{accelerator_id}", status_code=204, dependencies=[WriteAccess])
def delete_accelerator(
    accelerator_id: str, catalog: CatalogDep, if_match: IfMatch = None
) -> Response:
    """Delete an accelerator (412 if If-Match is stale)."""
    catalog.delete_accelerator(accelerator_id, if_match=if_match)
    return Response(status_code=204)
