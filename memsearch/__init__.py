"""memsearch: local-first memory search for AI agents and terminal users.

The public names load on first use, so `memsearch --help` does not pay for numpy.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "Client": "memsearch.client",
    "Memsearch": "memsearch.api",
    "Memory": "memsearch.models",
    "NewMemory": "memsearch.models",
    "Profile": "memsearch.profiles",
    "SearchOutcome": "memsearch.retrieval.explain",
    "SearchRequest": "memsearch.retrieval.request",
    "Scope": "memsearch.store",
}

__all__ = [*_EXPORTS, "__version__"]

if TYPE_CHECKING:
    from memsearch.api import Memsearch as Memsearch
    from memsearch.client import Client as Client
    from memsearch.models import Memory as Memory
    from memsearch.models import NewMemory as NewMemory
    from memsearch.profiles import Profile as Profile
    from memsearch.retrieval.explain import SearchOutcome as SearchOutcome
    from memsearch.retrieval.request import SearchRequest as SearchRequest
    from memsearch.store import Scope as Scope


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'memsearch' has no attribute {name!r}")
