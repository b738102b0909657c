"""Error hierarchy. Client errors carry an HTTP status; one handler maps them."""

from __future__ import annotations


class KBError(Exception):
    """Base of every error the product raises on purpose."""

    status_code = 500
    title = "Internal error"

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


class ClientError(KBError):
    status_code = 400
    title = "Bad request"


class ValidationError(ClientError):
    status_code = 400
    title = "Invalid request"


class NotFoundError(ClientError):
    status_code = 404
    title = "Not found"


class ConflictError(ClientError):
    status_code = 409
    title = "Conflict"


class AuthError(ClientError):
    status_code = 401
    title = "Unauthorized"


class ForbiddenError(ClientError):
    status_code = 403
    title = "Forbidden"


class UnsupportedMediaTypeError(ClientError):
    status_code = 415
    title = "Unsupported media type"


class ConfigError(KBError):
    """A setting is wrong; the process should exit with this one line."""

    title = "Configuration error"


class DatabaseError(KBError):
    title = "Database error"


class UnavailableError(KBError):
    """The database cannot be reached right now; the client should retry (503 with Retry-After)."""

    status_code = 503
    title = "Service unavailable"

    def __init__(self, detail: str = "the database is unreachable right now; retry shortly") -> None:
        super().__init__(detail)


class OverloadedError(UnavailableError):
    """A wait ran out while the database is up — a pool slot, a new connection or a statement under load: the
    server is busy, not the database gone (503 with Retry-After, its own title)."""

    title = "Service overloaded"

    def __init__(self, detail: str = "the server is busy: a database connection or statement waited too long; "
                                     "retry shortly") -> None:
        super().__init__(detail)


class IngestError(KBError):
    """A single file could not be ingested; carries a readable reason."""

    title = "Ingest error"


class EmbeddingError(KBError):
    """A remote embeddings endpoint failed or answered with something unusable."""


class LLMError(KBError):
    """An LLM call failed after retries, or returned unusable output."""

    title = "LLM error"
