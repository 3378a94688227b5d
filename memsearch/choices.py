"""The closed sets of values the library accepts, in a module that imports nothing, so front ends
(the CLI's option types, the servers' schemas) build their choices from them at no import cost."""

from __future__ import annotations

MODES = ("auto", "vector", "hybrid", "lexical")
GRANULARITIES = ("turn", "session")
KINDS = ("note", "turn", "session")  # what a memory is: memsearch.models.Memory.kind
IMPORT_FORMATS = ("jsonl", "chat", "locomo", "longmemeval")  # memsearch.api.Memsearch.import_text
BENCHMARK_FORMATS = ("locomo", "longmemeval")  # memsearch.eval
# ndjson: one record a line (a search hit, a memory), for `llm similar`-style pipes; jsonl: one
# document a line (a search's whole result set, a memory).
OUTPUT_FORMATS = ("table", "json", "jsonl", "ndjson", "csv")
RERANK_METHODS = ("off", "deterministic", "llm")  # the re-rank hook (memsearch.profiles.Rerank)

# How a yes-or-no is spelled in text (an environment variable, config.toml, a URL parameter):
# one set everywhere, so `MEMSEARCH_READ_ONLY=off` and `?touch=off` mean what they say.
SWITCH_ON = ("true", "yes", "on", "1")
SWITCH_OFF = ("false", "no", "off", "0")


def switch(text: str) -> bool | None:
    """A yes-or-no spelled as text (any case, spaces around), or None when it is neither."""
    word = text.strip().lower()
    return True if word in SWITCH_ON else False if word in SWITCH_OFF else None
