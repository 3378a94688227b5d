"""The HTTP API's OpenAPI document, made from its endpoint table and the operations' fields
(`memsearch.operations`): every parameter and body schema is a `Field.json_schema()` or an
`Operation.json_schema()`, with the same types, bounds and choices the API checks."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memsearch import __version__
from memsearch.operations import Field, Operation


@dataclass(frozen=True)
class Endpoint:
    """One route of the API: (method, path, operation), how it reads the operation's values, and
    the fields its documented parameters and body are made of."""

    method: str
    path: str
    operation: Operation | None  # what it runs (None: a route of its own `handler`)
    summary: str
    operation_id: str
    query: Operation | None = None  # the documented query parameters: these fields (less the path's)
    body: Operation | None = None  # a JSON body of these fields (the operation's, or CEMS's names for them)
    content_types: tuple[str, ...] = ()  # the body types a POST takes (without `body`: a file's text)
    path_fields: tuple[Field, ...] = ()
    returns: str = "the CLI's JSON document"
    into: Mapping[str, str] = field(default_factory=dict)  # a path parameter → the field it gives
    translate: Callable[[Any], dict[str, Any]] | None = None  # a body → the operation's values
    handler: Callable[..., Awaitable[Any]] | None = None  # (Service, Request) -> the JSON document


ERROR_STATUSES = {
    "400": "A value is malformed or out of bounds, or a parameter or field is unknown",
    "401": "The bearer token is missing or wrong",
    "403": "The request came from a web page of another origin",
    "404": "No such memory or route",
    "405": "The route does not take this method",
    "409": "The key exists already, or the store's model differs",
    "415": "The body is not of a type the route takes",
    "421": "The Host header does not name this server",
}
JSON_OBJECT = {"application/json": {"schema": {"type": "object"}}}


def openapi_document(endpoints: Sequence[Endpoint]) -> dict[str, Any]:
    error = {
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "error": {"type": "string"},
                        "type": {"type": "string"},
                        "field": {"type": ["string", "null"]},
                    },
                }
            }
        }
    }
    paths: dict[str, Any] = {}
    for endpoint in endpoints:
        operation: dict[str, Any] = {
            "summary": endpoint.summary,
            "operationId": endpoint.operation_id,
            "responses": {
                "200": {"description": endpoint.returns, "content": JSON_OBJECT},
                **{code: {"description": text, **error} for code, text in ERROR_STATUSES.items()},
            },
        }
        parameters = [
            {"name": f.name, "in": "path", "required": True, "schema": f.json_schema(), "description": f.description}
            for f in endpoint.path_fields
        ]
        if endpoint.query is not None:
            path_names = {f.name for f in endpoint.path_fields}
            parameters += [
                {
                    "name": f.query_name,
                    "in": "query",
                    "required": f.required,
                    "schema": f.json_schema(),
                    "description": f.description,
                    **({"explode": True} if f.type == "array" else {}),
                }
                for f in endpoint.query.fields
                if f.type != "object" and f.name not in path_names
            ]
        if parameters:
            operation["parameters"] = parameters
        if endpoint.body is not None:
            operation["requestBody"] = {
                "required": True,
                "content": {kind: {"schema": endpoint.body.json_schema()} for kind in endpoint.content_types},
            }
        elif endpoint.content_types:
            operation["requestBody"] = {
                "required": True,
                "description": "The file's content",
                "content": {kind: {"schema": {"type": "string"}} for kind in endpoint.content_types},
            }
        paths.setdefault(endpoint.path, {})[endpoint.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "memsearch", "version": __version__},
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
        "security": [{"bearer": []}, {}],
        "paths": paths,
    }
