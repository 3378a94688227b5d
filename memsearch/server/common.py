"""What the MCP server and the HTTP API share: the warm library, and the health document."""

from __future__ import annotations

import os
import threading
from typing import Any

__all__ = ["WarmService", "health_document"]


def health_document(authenticated: bool, db: object) -> dict[str, Any]:
    """`/health` of either HTTP server: liveness for anyone; with the token (or when none is
    required) also the version, the store and the pid, by which the CLI knows its server."""
    if not authenticated:
        return {"status": "ok"}
    from memsearch import __version__

    return {"status": "ok", "version": __version__, "db": str(db), "pid": os.getpid()}


class WarmService:
    """One `Memsearch` for the life of the process, opened and warmed before the first request:
    the store created if need be, the model and its ONNX session loaded, the vector matrix read."""

    def __init__(self, db: str | os.PathLike[str] | None, model: str | None = None, *, warm: bool = True) -> None:
        from memsearch.api import Memsearch

        self.ms: Memsearch = Memsearch(db, model=model)
        self._lock = threading.Lock()
        if warm:
            self.warm()

    def warm(self) -> None:
        with self._lock:
            self.ms.warm()

    def close(self) -> None:
        self.ms.close()
