"""Health, collections and documents."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, Literal

import msgspec
import structlog
from litestar import Controller, Response, delete, get, post
from litestar.datastructures import State
from litestar.openapi import ResponseSpec
from litestar.params import Parameter

from ingest.jobs import finish_document_delete
from ingest.pageindex import export_pageindex
from ingest.render import LinesCache, PageCache
from ingest.store import (
    DELETE_BATCH_ROWS,
    Deleting,
    DocumentInfo,
    FactRow,
    NodeInfo,
    document_facts,
    get_document,
    list_documents,
    start_delete,
)
from kb.api.common import (
    BEARER,
    COLLECTION_NAME,
    PROBLEM_JSON,
    RETRY_AFTER_S,
    CollectionParam,
    DbId,
    admin_guard,
    errors,
    problem_body,
    public_path,
    read_guard,
)
from kb.core.collections import Collection, create_collection, list_collections, lookup_collection_id
from kb.core.db import schema_version
from kb.core.errors import UnavailableError
from kb.core.settings import Settings
from kb.runtime import Runtime
from router.metadata import Entity

log = structlog.get_logger("kb.api")


class CollectionIn(msgspec.Struct, frozen=True):
    name: Annotated[str, msgspec.Meta(pattern=COLLECTION_NAME,
                                      description="letters, digits, '_', '.', '-'; at most 64")]
    description: Annotated[str, msgspec.Meta(max_length=2000, pattern=r"^[^\x00]*$")] = ""


def _public(doc: DocumentInfo, settings: Settings) -> DocumentInfo:
    return msgspec.structs.replace(doc, source_path=public_path(doc.source_path, settings))


class DocumentDetail(msgspec.Struct, frozen=True):
    document: DocumentInfo
    tree: list[NodeInfo]
    entity: Entity | None = None
    """The company the document is about as routing and facts see it: the company values joined with its own
    and why (legal form, a former name, the metadata ``entity``, which overrides); null without a company."""


@get("/health", responses=errors(503))
async def health(rt: Runtime, state: State) -> Response[dict[str, Any]]:
    """200 when ready; 503 (with Retry-After) while the database cannot be reached within 2 s, or while the
    stored vectors come from an embedder other than this server's (``kb reembed`` since it started). What
    this says, the other endpoints do: a 200 here lets queries through at once (and a 503 stops them)."""
    version, db_ok = 0, False
    if await rt.probe_database():
        try:
            version = await schema_version(rt.pool)
            db_ok = True
        except Exception as exc:  # noqa: BLE001 - health reports instead of failing
            log.warning("health.db_unreachable", error=f"{type(exc).__name__}: {exc}"[:300])
    if db_ok != rt.db_available:  # seen before the database watcher's next round
        (log.info if db_ok else log.warning)("db.available" if db_ok else "db.unavailable", seen_by="health")
        rt.db_available = db_ok
    embedder_problem = state.get("embedder_problem")
    body = {
        "status": "ok" if db_ok and not embedder_problem else "unavailable",
        "database": db_ok,
        "schema_version": version,
        "embedder": {"loaded": rt.embedder.dimension > 0, "model": rt.embedder.model_id,
                     "dimension": rt.embedder.dimension, "matches_database": not embedder_problem},
        "llm": {"offline": rt.chat.offline, "model": rt.chat.model_id},
    }
    if (runner := state.get("worker")) is not None:  # off with KB_RUN_WORKER=false; stopped: paused or crashed
        body["ingest_worker"] = {"state": runner.state, "reason": runner.reason}
    if db_ok and not embedder_problem:
        return Response(body)
    # not ready: problem details (RFC 9457) with the health fields as extension members
    down = UnavailableError(embedder_problem) if db_ok and embedder_problem else UnavailableError()
    problem = problem_body(down.status_code, down.title, down.detail, body)
    return Response(problem, status_code=503, media_type=PROBLEM_JSON, headers={"Retry-After": str(RETRY_AFTER_S)})


class DeleteAccepted(msgspec.Struct, frozen=True):
    document_id: int
    status: str  # "deleting"
    chunks: int  # chunks to remove


_DELETES: set[asyncio.Task[None]] = set()  # background deletes in flight (kept referenced until done)


async def _finish_delete(rt: Runtime, deleting: Deleting) -> None:
    try:
        await finish_document_delete(rt.pool, deleting)
    except Exception as exc:  # noqa: BLE001 - a background task: logged; a worker resumes the delete later
        log.warning("documents.delete_interrupted", doc_id=deleting.id, error=f"{type(exc).__name__}: {exc}"[:300])


class CatalogController(Controller):
    path = "/kb"
    guards = [read_guard]
    security = BEARER

    @get("/collections", responses=errors(401))
    async def collections(self, rt: Runtime) -> list[Collection]:
        return await list_collections(rt.pool)

    @post("/collections", guards=[admin_guard], status_code=201, responses=errors(400, 401, 403, 409, 415))
    async def create(self, rt: Runtime, data: CollectionIn) -> Collection:
        return await create_collection(rt.pool, data.name, data.description)

    @get("/documents", responses=errors(400, 401, 404))
    async def documents(
        self, rt: Runtime, collection: CollectionParam = "default",
        limit: int = Parameter(default=100, ge=1, le=1000), offset: int = Parameter(default=0, ge=0, le=10**9),
    ) -> list[DocumentInfo]:
        docs = await list_documents(rt.pool, collection, limit=limit, offset=offset)
        return [_public(d, rt.settings) for d in docs]

    @get("/documents/{doc_id:int}", responses=errors(400, 401, 404))
    async def document(self, rt: Runtime, doc_id: DbId) -> DocumentDetail:
        info, nodes = await get_document(rt.pool, doc_id)
        entity = None
        if (company := str(info.metadata.get("company") or "")) and info.collection:
            catalog = await rt.pipeline.catalogs.get(await lookup_collection_id(rt.pool, info.collection))
            entity = catalog.entities.get(company)
        return DocumentDetail(document=_public(info, rt.settings), tree=nodes, entity=entity)

    @get("/documents/{doc_id:int}/tree", responses=errors(400, 401, 404))
    async def tree(self, rt: Runtime, doc_id: DbId,
                   format: Literal["pageindex"] = "pageindex") -> dict[str, Any]:
        """The document's tree in an exchange format; ``pageindex``: nested PageIndex JSON."""
        return await export_pageindex(rt.pool, doc_id)

    @get("/documents/{doc_id:int}/facts", responses=errors(400, 401, 404))
    async def facts(self, rt: Runtime, doc_id: DbId,
                    concept: str | None = Parameter(default=None, max_length=64, pattern=r"^[a-z_]*$")
                    ) -> list[FactRow]:
        """The financial facts read from the document's statements at ingest: one row per line item and period
        column (``concept``: only that vocabulary measure, e.g. ``revenue``; see ``GET /kb/capabilities``)."""
        return await document_facts(rt.pool, doc_id, concept or None)

    @delete("/documents/{doc_id:int}", guards=[admin_guard], status_code=202,
            responses={**errors(400, 401, 403, 404),
                       204: ResponseSpec(None, description="deleted within the request")})
    async def remove(self, rt: Runtime, pages: PageCache, lines: LinesCache,
                     doc_id: DbId) -> Response[DeleteAccepted | None]:
        """Delete a document: it leaves listings and the collection's statistics at once, and its rows go in
        batches. 204 when that is done within the request (at most one batch of chunks); 202 for a larger
        one, whose rows are removed in the background (a worker finishes a delete the server did not)."""
        deleting = await start_delete(rt.pool, doc_id)
        await asyncio.to_thread(pages.drop, doc_id)
        lines.drop(doc_id)
        if deleting.chunks <= DELETE_BATCH_ROWS:
            await finish_document_delete(rt.pool, deleting)
            return Response(None, status_code=204)
        task = asyncio.create_task(_finish_delete(rt, deleting))
        _DELETES.add(task)
        task.add_done_callback(_DELETES.discard)
        return Response(DeleteAccepted(document_id=doc_id, status="deleting", chunks=deleting.chunks),
                        status_code=202)

