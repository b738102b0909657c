"""Admin: folder ingest jobs, job progress, file upload."""

from __future__ import annotations

import asyncio
import hashlib
import re
import unicodedata
import uuid
from pathlib import Path
from typing import Annotated

import msgspec
from litestar import Controller, delete, get, post
from litestar.datastructures import UploadFile
from litestar.enums import RequestEncodingType
from litestar.params import Body, Parameter

from ingest.formats import SUPPORTED, format_of
from ingest.jobs import (
    JobStatus,
    cancel_file,
    cancel_job,
    count_jobs,
    create_job,
    get_job,
    list_jobs,
    reingest_document,
    remove_item,
    resolve_ingest_path,
    retry_item,
)
from kb.api.common import (
    BEARER,
    COLLECTION_NAME,
    DbId,
    admin_guard,
    errors,
    public_path,
    scrub_paths,
)
from kb.core.collections import get_collection
from kb.core.errors import ValidationError
from kb.core.settings import Settings
from kb.runtime import Runtime

_UNSAFE = re.compile(r"[^\w. -]+")  # \w is Unicode: 報告 stays 報告


def upload_name(filename: str, content: bytes) -> str:
    """A safe, unique document name for an upload: the name's slug plus a short content hash.

    Different uploads never share a name (so one never replaces another); the same bytes get the same
    name (so a repeated upload is skipped as unchanged).
    """
    base = Path(unicodedata.normalize("NFC", filename)).name
    stem, suffix = Path(base).stem, Path(base).suffix.lower()
    slug = _UNSAFE.sub("_", stem).encode()[:150].decode(errors="ignore").strip(" ._") or "upload"  # ≤ 255 bytes
    return f"{slug}-{hashlib.sha256(content).hexdigest()[:10]}{_UNSAFE.sub('', suffix)}"


def _save(folder: Path, name: str, content: bytes) -> Path:
    """Store an upload in ``folder`` (one per content): the file already there when the same bytes were
    uploaded before (under any name), else ``folder/name``."""
    folder.mkdir(parents=True, exist_ok=True)
    for existing in sorted(folder.iterdir()):
        if existing.is_file() and not existing.name.endswith(".part"):
            return existing
    target = folder / name
    tmp = target.with_suffix(f"{target.suffix}.{uuid.uuid4().hex[:8]}.part")
    tmp.write_bytes(content)
    tmp.replace(target)
    return target


def _public_job(job: JobStatus, settings: Settings) -> JobStatus:
    """A job as clients see it: paths relative to the ingest root (or ``uploads/``), errors without them."""
    def text(value: str | None) -> str | None:
        return scrub_paths(value, settings) if value else value

    items = [msgspec.structs.replace(i, path=public_path(i.path, settings), error=text(i.error)) for i in job.items]
    return msgspec.structs.replace(job, root_path=public_path(job.root_path, settings), error=text(job.error),
                                   items=items)


class IngestIn(msgspec.Struct, frozen=True):
    path: str
    collection: Annotated[str, msgspec.Meta(pattern=COLLECTION_NAME)] = "default"
    recursive: bool = False
    metadata: str | None = None
    force: Annotated[bool, msgspec.Meta(description=(
        "re-process every file, even unchanged ones (one whose settings, embedder, LLM model or given metadata "
        "changed is re-processed anyway)"))] = False


class JobPage(msgspec.Struct, frozen=True):
    jobs: list[JobStatus]
    total: int  # all jobs
    limit: int
    offset: int


class JobCreated(msgspec.Struct, frozen=True):
    job_id: int
    status_url: str


class UploadForm(msgspec.Struct):
    file: UploadFile
    collection: Annotated[str, msgspec.Meta(pattern=COLLECTION_NAME)] = "default"


class AdminController(Controller):
    path = "/kb/admin"
    guards = [admin_guard]
    security = BEARER

    @post("/ingest", status_code=202, responses=errors(400, 401, 403, 404, 415))
    async def ingest(self, rt: Runtime, data: IngestIn) -> JobCreated:
        root = rt.settings.ingest.root
        coll = await get_collection(rt.pool, data.collection)
        path = resolve_ingest_path(root, data.path)
        meta = resolve_ingest_path(root, data.metadata) if data.metadata else None
        job_id = await create_job(rt.pool, collection_id=coll.id, path=path, recursive=data.recursive,
                                  metadata_path=meta, allowed_root=root, name_root=root, force=data.force)
        return JobCreated(job_id=job_id, status_url=f"/kb/admin/jobs/{job_id}")

    @get("/jobs", responses=errors(400, 401, 403))
    async def jobs(
        self, rt: Runtime, limit: int = Parameter(default=20, ge=1, le=200),
        offset: int = Parameter(default=0, ge=0, le=10**9),
        items: int = Parameter(default=100, ge=0, le=10_000, description="items shown per job (files: all)"),
    ) -> JobPage:
        """The newest jobs first, ``limit`` from ``offset`` (``total``: all jobs); each job's totals count all
        its files, its ``items`` the first ``items`` of them (``GET /kb/admin/jobs/{id}`` pages through them)."""
        listed = await list_jobs(rt.pool, limit, offset, items_limit=items)
        return JobPage(jobs=[_public_job(j, rt.settings) for j in listed], total=await count_jobs(rt.pool),
                       limit=limit, offset=offset)

    @get("/jobs/{job_id:int}", responses=errors(400, 401, 403, 404))
    async def job(
        self, rt: Runtime, job_id: DbId, items_limit: int = Parameter(default=1000, ge=0, le=10_000),
        items_offset: int = Parameter(default=0, ge=0, le=10**9),
    ) -> JobStatus:
        """A job with its totals and its items, ``items_limit`` from ``items_offset`` in file order (``files``:
        how many there are)."""
        return _public_job(await get_job(rt.pool, job_id, items_limit=items_limit, items_offset=items_offset),
                           rt.settings)

    @post("/jobs/{job_id:int}/cancel", status_code=200, responses=errors(400, 401, 403, 404, 409))
    async def cancel(self, rt: Runtime, job_id: DbId) -> JobStatus:
        """Cancel a job: pending files become ``cancelled`` now; a file being ingested stops within 2 s (its
        parser process killed) and stores nothing. 409 when the job has already finished."""
        await cancel_job(rt.pool, job_id)
        return _public_job(await get_job(rt.pool, job_id, items_limit=1000), rt.settings)

    @post("/jobs/{job_id:int}/items/{item_id:int}/cancel", status_code=200,
          responses=errors(400, 401, 403, 404, 409))
    async def cancel_file(self, rt: Runtime, job_id: DbId, item_id: DbId) -> JobStatus:
        """Cancel one file of the job (``items[].id``): a queued file at once, a file being ingested within 2 s
        (its parser process killed; it stores nothing); the job's other files go on. 409 for a finished file."""
        await cancel_file(rt.pool, job_id, item_id)
        return _public_job(await get_job(rt.pool, job_id, items_limit=1000), rt.settings)

    @post("/jobs/{job_id:int}/items/{item_id:int}/retry", status_code=200,
          responses=errors(400, 401, 403, 404, 409))
    async def retry_file(self, rt: Runtime, job_id: DbId, item_id: DbId) -> JobStatus:
        """Queue a failed or cancelled file of the job again (``items[].id``); 409 for a file in another state."""
        await retry_item(rt.pool, job_id, item_id)
        return _public_job(await get_job(rt.pool, job_id, items_limit=1000), rt.settings)

    @delete("/jobs/{job_id:int}/items/{item_id:int}", status_code=204, responses=errors(400, 401, 403, 404, 409))
    async def remove_file(self, rt: Runtime, job_id: DbId, item_id: DbId) -> None:
        """Remove a finished file from the job's list (a failed file stored nothing); 409 while it is queued
        or running."""
        await remove_item(rt.pool, job_id, item_id)

    @post("/documents/{doc_id:int}/reingest", status_code=202, responses=errors(400, 401, 403, 404, 409),
          summary="Re-process one document from its source file")
    async def reingest(self, rt: Runtime, doc_id: DbId) -> JobCreated:
        """A job re-processing the document from its source file under its name, even if nothing changed (new
        settings, embedder or LLM are applied); the stored version stays until the new one is written. 409 when
        the source is gone or lies outside KB_INGEST_ROOT and the uploads folder."""
        job_id = await reingest_document(rt.pool, doc_id, ingest_root=rt.settings.ingest.root,
                                         uploads=rt.settings.database.data_dir / "uploads")
        return JobCreated(job_id=job_id, status_url=f"/kb/admin/jobs/{job_id}")

    @post("/documents", status_code=202, responses=errors(400, 401, 403, 404, 413))
    async def upload(
        self, rt: Runtime,
        data: Annotated[UploadForm, Body(media_type=RequestEncodingType.MULTI_PART)],
    ) -> JobCreated:
        coll = await get_collection(rt.pool, data.collection)
        if format_of(data.file.filename or "") is None:
            raise ValidationError(f"unsupported or missing file name {data.file.filename!r}; "
                                  f"supported: {', '.join(sorted(SUPPORTED))}")
        content = await data.file.read()
        # one folder per content: the same bytes uploaded again are stored once; the worker removes an
        # upload no document keeps (skipped, failed, cancelled), and deleting its document removes it too
        uploads = rt.settings.database.data_dir / "uploads"
        name = await asyncio.to_thread(upload_name, data.file.filename or "", content)
        folder = uploads / coll.name / hashlib.sha256(content).hexdigest()[:32]
        target = await asyncio.to_thread(_save, folder, name, content)
        job_id = await create_job(rt.pool, collection_id=coll.id, path=target, allowed_root=uploads, upload=True)
        return JobCreated(job_id=job_id, status_url=f"/kb/admin/jobs/{job_id}")
