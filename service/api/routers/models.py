"""/v1/models: list, read, create, import, replace, merge-patch and delete model shapes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Body, Query, Request, Response
from pydantic import BaseModel

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
from service.api.schemas.common import Cursor, ListPage, text_query
from service.api.schemas.models import Model, ModelCreate, ModelImport, ModelReplace

router = APIRouter(prefix="/v1/models", tags=["catalog"])

READ_ONLY = ("total_params", "active_params", "origin", "version", "created_at", "updated_at")
if TYPE_CHECKING:
    ModelPatch = BaseModel
else:
    ModelPatch = merge_patch_model(ModelReplace, "ModelPatch", ("id", *READ_ONLY))


@router.get("", response_model=ListPage[Model], dependencies=[ReadAccess])
async def list_models(
    request: Request,
    family: Annotated[str | None, text_query()] = None,
    moe: bool | None = Query(default=None, description="true: only MoE; false: only dense."),
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Cursor = None,
) -> dict[str, Any]:
    """List models ordered by id, filtered and paginated by an opaque cursor."""
    page = await read_catalog(
        request,
        lambda catalog: catalog.list_models(family=family, moe=moe, cursor=cursor, limit=limit),
    )
    return {"items": page.items, "next_cursor": page.next_cursor}


@router.post(
    "/import",
    status_code=201,
    response_model=Model,
    dependencies=[WriteAccess],
    responses=problem_responses(409),
)
def import_model(body: ModelImport, catalog: CatalogDep) -> Response:
    """Create a model from a Hugging Face config.json (422 names the offending key).

    Also 422 (not stated in the schema): a config that lacks a key its model_type's reader
    needs (gemma3 reads the text model's keys from `text_config`, llama4 too when it has
    one), or whose shape breaks a rule of POST /v1/models that compares two fields
    (num_attention_heads a multiple of num_key_value_heads, hidden_size divisible by the
    heads unless head_dim is given, num_experts_per_tok at most the experts, leading dense
    layers below num_hidden_layers, layer_types one per layer) or exceeds its bounds.
    """
    extra = {"name": body.name, "hf_repo": body.hf_repo, "sources": body.sources}
    created = catalog.import_model(body.id, body.hf_config, extra)
    return representation_response(created, status_code=201, location=f"/v1/models/{body.id}")


@router.get("/{model_id}", response_model=Model, dependencies=[ReadAccess])
async def get_model(model_id: str, request: Request, if_none_match: IfNoneMatch = None) -> Response:
    """Return one model with a strong ETag (304 when If-None-Match matches)."""
    representation = await read_catalog(request, lambda catalog: catalog.get_model(model_id))
    return representation_response(representation, if_none_match=if_none_match)


@router.post(
    "",
    status_code=201,
    response_model=Model,
    dependencies=[WriteAccess],
    responses=problem_responses(409),
)
def create_model(body: ModelCreate, catalog: CatalogDep) -> Response:
    """Add a model shape (422 naming the inconsistent field, 409 if the id exists).

    Rules that compare two fields, which the schema cannot state, give a 422 naming the field:
    num_kv_heads divides num_heads, experts_per_token <= num_experts, first_dense_layers <
    num_layers and num_sliding_layers <= num_layers; mtp_layers <= num_layers. A layer_pattern
    has one letter per layer and at least one `*` (num_sliding_layers at most its `*` count;
    with num_experts, first_dense_layers below its `-` count; no mtp_layers), and `M` letters
    need positive mamba_* fields with mamba_n_groups dividing mamba_num_heads.
    """
    created = catalog.create_model(body.model_dump())
    return representation_response(created, status_code=201, location=f"/v1/models/{created['id']}")


@router.put("/{model_id}", response_model=Model, dependencies=[WriteAccess])
def replace_model(
    model_id: str, body: ModelReplace, catalog: CatalogDep, if_match: IfMatch = None
) -> Response:
    """Replace a model's fields (412 if If-Match is stale; 422 as for POST /v1/models)."""
    check_body_id(model_id, body.id)
    return representation_response(
        catalog.replace_model(model_id, body.model_dump(), if_match=if_match)
    )


@router.patch("/{model_id}", response_model=Model, dependencies=[WriteAccess])
def patch_model(
    model_id: str,
    catalog: CatalogDep,
    body: Annotated[ModelPatch, Body()],
    if_match: IfMatch = None,
) -> Response:
    """Merge-patch a model (RFC 7396; 412 if If-Match is stale).

    The merged model must be a valid POST /v1/models body, else 422 naming the field: a patch
    valid on its own may break a rule with the stored fields (e.g. a num_kv_heads that does
    not divide the stored num_heads).
    """
    patch = body.model_dump(exclude_unset=True)
    current = catalog.get_model(model_id, for_update=True)
    editable = {k: v for k, v in current.items() if k not in READ_ONLY}
    check_body_id(model_id, patch.get("id"))
    merged = validate_as(ModelReplace, merge_patch(editable, patch))
    return representation_response(catalog.replace_model(model_id, merged, if_match=if_match))


@router.delete("/{model_id}", status_code=204, dependencies=[WriteAccess])
def delete_model(model_id: str, catalog: CatalogDep, if_match: IfMatch = None) -> Response:
    """Delete a model (412 if If-Match is stale)."""
    catalog.delete_model(model_id, if_match=if_match)
    return Response(status_code=204)
