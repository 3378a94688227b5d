"""An opt-in LLM: any OpenAI-compatible chat-completions endpoint (Ollama, llama.cpp's server,
vLLM, a hosted API), configured by MEMSEARCH_LLM_URL, MEMSEARCH_LLM_MODEL and MEMSEARCH_LLM_API_KEY.

Nothing here runs unless an endpoint is configured; the HTTP client (httpx2) is imported on the
first call. The key is never stored, printed or logged: it lives in the settings object only
(hidden from its repr) and is scrubbed from every failure message. A failure of any kind
(timeout, refused connection, HTTP error, a reply that is not the protocol's JSON) is an
`LLMFailure` whose text is the reason the explain trace shows; the stages that call the LLM catch
it and go on offline. Answers are cached on disk keyed by (model, prompt), so repeated searches
and evaluations do not pay twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

DEFAULT_TIMEOUT_S = 2.0
MAX_TIMEOUT_S = 120.0
Message = Mapping[str, str]  # {"role": "system" | "user", "content": ...}


class LLMFailure(Exception):
    """The LLM gave no usable answer; the message says why, in a few words (never the key)."""


@dataclass(frozen=True)
class LLMSettings:
    url: str  # a base URL (…/v1) or the full …/chat/completions URL
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def endpoint(self) -> str:
        url = self.url.rstrip("/")
        return url if url.endswith("/chat/completions") else f"{url}/chat/completions"


def llm_settings(environ: Mapping[str, str] | None = None) -> LLMSettings | None:
    """The configured endpoint, or None when there is none. The one place settings are resolved
    (the environment today; a config file can be read here too)."""
    env = os.environ if environ is None else environ
    url = env.get("MEMSEARCH_LLM_URL", "").strip()
    if not url:
        return None
    from memsearch.errors import InvalidInputError

    if not url.startswith(("http://", "https://")):
        raise InvalidInputError("must be an http:// or https:// URL", field="MEMSEARCH_LLM_URL")
    model = env.get("MEMSEARCH_LLM_MODEL", "").strip()
    if not model:
        raise InvalidInputError("must name the model when MEMSEARCH_LLM_URL is set", field="MEMSEARCH_LLM_MODEL")
    timeout = DEFAULT_TIMEOUT_S
    if raw := env.get("MEMSEARCH_LLM_TIMEOUT", "").strip():
        try:
            timeout = float(raw)
        except ValueError:
            timeout = -1.0
        if not 0 < timeout <= MAX_TIMEOUT_S:
            raise InvalidInputError(
                f"must be a number of seconds above 0 and at most {MAX_TIMEOUT_S:g}, not {raw!r}",
                field="MEMSEARCH_LLM_TIMEOUT",
            )
    return LLMSettings(url, model, env.get("MEMSEARCH_LLM_API_KEY") or None, timeout)


@dataclass(frozen=True)
class Answer:
    text: str
    cached: bool
    ms: float  # time spent (≈0 for a cached answer)


class LLM(Protocol):
    """What the stages need of an LLM: one chat completion (or an LLMFailure)."""

    @property
    def timeout_s(self) -> float: ...

    def estimate_ms(self) -> float:
        """What a call is expected to take (for a latency budget)."""
        ...

    def is_cached(self, messages: Sequence[Message]) -> bool: ...

    def complete(self, messages: Sequence[Message], *, max_tokens: int, timeout_s: float | None = None) -> Answer: ...


def prompt_key(model: str, messages: Sequence[Message]) -> str:
    """The cache key of (model, prompt)."""
    blob = json.dumps([model, [dict(m) for m in messages]], ensure_ascii=False, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def reply_text(document: Any) -> str:
    """The assistant's text of a chat-completions reply; LLMFailure when it is not one."""
    try:
        content = document["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise LLMFailure("malformed reply (no choices[0].message.content)") from None
    if not isinstance(content, str):
        raise LLMFailure("malformed reply (content is not text)")
    return content


ECHO_LINE_CHARS = 16  # prompt lines shorter than this ("Memories:") are no sign of an echo


def repeats_prompt(text: str, messages: Sequence[Message]) -> bool:
    """Whether a reply repeats a line of the instructions (the system message) or the query's
    line (the user message's first): a small model that continues the prompt instead of
    answering it writes such lines back, which no answer needs."""
    lines = [line for m in messages if m["role"] == "system" for line in m["content"].splitlines()]
    lines += [m["content"].splitlines()[0] for m in messages if m["role"] == "user" and m["content"]]
    reply = " ".join(text.split())
    return any(len(line) >= ECHO_LINE_CHARS and " ".join(line.split()) in reply for line in lines)


class HttpLLM:
    """An OpenAI-compatible endpoint over HTTP, with the disk cache and a latency estimate."""

    def __init__(self, settings: LLMSettings, cache_dir: Path | None = None) -> None:
        self._settings = settings
        self._cache_dir = cache_dir
        self._client: Any = None
        self._lock = threading.Lock()  # one client for every thread of a server

    def __repr__(self) -> str:  # never the key
        return f"HttpLLM(url={self._settings.url!r}, model={self._settings.model!r})"

    @property
    def timeout_s(self) -> float:
        return self._settings.timeout_s

    # -- disk cache and latency --------------------------------------------------------------

    def _folder(self) -> Path:
        if self._cache_dir is None:
            from memsearch.paths import cache_dir

            self._cache_dir = cache_dir() / "llm"
        return self._cache_dir

    def _path(self, messages: Sequence[Message]) -> Path:
        return self._folder() / f"{prompt_key(self._settings.model, messages)}.json"

    def is_cached(self, messages: Sequence[Message]) -> bool:
        return self._cached(messages) is not None

    def _read(self, path: Path) -> Any:
        """A cache file's document, when it is the user's own in a folder of theirs (a file another
        user could have written is not read: it could hold any answer)."""
        from memsearch.paths import read_own_file

        raw = read_own_file(path)
        return None if raw is None else json.loads(raw)

    def _cached(self, messages: Sequence[Message]) -> str | None:
        try:
            text = self._read(self._path(messages))["text"]
        except (ValueError, KeyError, TypeError):
            return None
        return text if isinstance(text, str) else None

    def _write(self, path: Path, document: Mapping[str, Any]) -> None:
        """Atomically; a cache that cannot be written is no reason to fail a search."""
        from memsearch.paths import make_private_dirs, write_private

        try:
            make_private_dirs(path.parent)
            partial = path.with_suffix(f".{os.getpid()}-{threading.get_ident()}.tmp")
            write_private(partial, json.dumps(document, ensure_ascii=False))
            os.replace(partial, path)
        except OSError:
            pass

    def _latency_path(self) -> Path:
        endpoint = hashlib.sha256(f"{self._settings.endpoint}|{self._settings.model}".encode()).hexdigest()[:16]
        return self._folder() / f"latency-{endpoint}.json"

    def estimate_ms(self) -> float:
        """The moving average of this endpoint's calls; the timeout until one has been measured."""
        try:
            value = float(self._read(self._latency_path())["ms"])
        except (ValueError, KeyError, TypeError):
            return self.timeout_s * 1000
        return value

    def _record_latency(self, ms: float) -> None:
        previous = self.estimate_ms() if self._latency_path().is_file() else ms
        self._write(self._latency_path(), {"ms": 0.7 * previous + 0.3 * ms})

    # -- the call ---------------------------------------------------------------------------

    def complete(self, messages: Sequence[Message], *, max_tokens: int, timeout_s: float | None = None) -> Answer:
        if (text := self._cached(messages)) is not None:
            return Answer(text, cached=True, ms=0.0)
        timeout = self.timeout_s if timeout_s is None else max(0.001, min(timeout_s, self.timeout_s))
        started = time.perf_counter()
        text = self._post(messages, max_tokens, timeout)
        ms = (time.perf_counter() - started) * 1000
        self._write(self._path(messages), {"model": self._settings.model, "text": text})
        self._record_latency(ms)
        return Answer(text, cached=False, ms=ms)

    def _post(self, messages: Sequence[Message], max_tokens: int, timeout: float) -> str:
        import httpx2

        with self._lock:
            if self._client is None:
                self._client = httpx2.Client(follow_redirects=False, trust_env=False)
        headers = {"Content-Type": "application/json"}
        if self._settings.api_key:
            headers["Authorization"] = f"Bearer {self._settings.api_key}"
        body = {
            "model": self._settings.model,
            "messages": [dict(m) for m in messages],
            "temperature": 0,
            "max_tokens": max_tokens,
            "stream": False,
        }
        try:
            response = self._client.post(
                self._settings.endpoint, json=body, headers=headers, timeout=httpx2.Timeout(timeout)
            )
        except httpx2.TimeoutException:
            raise LLMFailure(f"timeout after {timeout:.1f} s") from None
        except httpx2.ConnectError:
            raise LLMFailure("cannot connect to the endpoint") from None
        except httpx2.HTTPError as error:
            raise LLMFailure(self._scrub(f"request failed ({type(error).__name__})")) from None
        if response.status_code != 200:
            meaning = {401: "unauthorized", 403: "forbidden", 404: "not found", 429: "rate limited"}
            word = meaning.get(response.status_code, "server error" if response.status_code >= 500 else "refused")
            raise LLMFailure(f"HTTP {response.status_code} ({word})")
        try:
            document = response.json()
        except ValueError:
            raise LLMFailure("malformed reply (not JSON)") from None
        return reply_text(document)

    def _scrub(self, text: str) -> str:
        key = self._settings.api_key
        return text.replace(key, "***") if key else text

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def configured_llm(environ: Mapping[str, str] | None = None) -> HttpLLM | None:
    """The configured endpoint as a client, or None (no import of the HTTP client either way)."""
    settings = llm_settings(environ)
    return HttpLLM(settings) if settings is not None else None
