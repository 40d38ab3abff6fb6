"""Read a JSON request body into its schema, with the envelope's answers: 400 `invalid_json` when it is not a JSON
object, 422 `validation_error` naming each field at fault. Every API route that takes a body reads it here."""

from __future__ import annotations

import json
from typing import Any, TypeVar

import pydantic

from api.errors import ApiError, validation_error_from

SchemaT = TypeVar("SchemaT", bound=pydantic.BaseModel)


def json_body(raw: bytes, schema: type[SchemaT]) -> SchemaT:
    """Return the body as a `schema`; raise 400 for no JSON object, 422 for bad fields."""
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise ApiError(400, "invalid_json", "The request body is not valid JSON.", hint="Send a JSON object.") from exc
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_json", "The request body must be a JSON object.", hint="Send a JSON object.")
    try:
        return schema.model_validate(data)
    except pydantic.ValidationError as exc:
        raise validation_error_from(exc.errors(include_url=False)) from exc


def body_schema(schema: type[pydantic.BaseModel], *, required: bool = True) -> dict[str, Any]:
    """Return the `openapi_extra` that documents a route's JSON body (read by `json_body`, not by ninja)."""
    content = {"application/json": {"schema": schema.model_json_schema()}}
    return {"requestBody": {"required": required, "content": content}}
