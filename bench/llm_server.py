"""A local OpenAI-protocol chat endpoint for the benchmarks: one instruct GGUF (Qwen2.5's ChatML
template) run on the CPU by ik_llama.cpp, served on loopback by Starlette + uvicorn.

Only what memsearch's LLM client sends is answered: POST /v1/chat/completions with `messages`,
`max_tokens` and `temperature` 0 (greedy decoding; the argmax of the logits is taken with numpy,
not by the runtime's sampler, which builds the whole vocabulary in a Python loop per token).
GET /health says the model is loaded. Each call's prompt tokens, generated tokens and seconds
are appended to --log (JSON lines), so a benchmark can say where the time went.

Run: python bench/llm_server.py --model FILE.gguf --runtime DIR --port N [--log FILE]
(`DIR` holds ik-llama-cpp-python, installed there with `pip install --target`; see bench/llm_row.py).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_SYSTEM = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."


def chatml(messages: list[dict[str, str]]) -> str:
    """Qwen2.5's chat template (the GGUF's tokenizer.chat_template, without tools)."""
    parts = []
    if not messages or messages[0].get("role") != "system":
        parts.append(f"<|im_start|>system\n{DEFAULT_SYSTEM}<|im_end|>\n")
    for message in messages:
        parts.append(f"<|im_start|>{message['role']}\n{message['content']}<|im_end|>\n")
    parts.append("<|im_start|>assistant\n")
    return "".join(parts)


class GreedyModel:
    def __init__(self, model_file: Path, runtime: Path, context: int) -> None:
        sys.path.insert(0, str(runtime))
        from ik_llama_cpp import IkLlama, _ctypes_api, _internals

        self._c, self._internals = _ctypes_api, _internals
        threads = len(os.sched_getaffinity(0))
        self._llama = IkLlama(str(model_file), n_ctx=context, n_threads=threads, verbose=False)
        self._context = self._llama._context
        self._model = self._llama._model
        self.context = context
        self.lock = threading.Lock()  # one context: one completion at a time

    def _logits(self) -> np.ndarray:
        pointer = self._c.llama_get_logits_ith(self._context.ctx, -1)
        array = ctypes.cast(pointer, ctypes.POINTER(ctypes.c_float))
        return np.ctypeslib.as_array(array, shape=(self._model.n_vocab,))

    def complete(self, prompt: str, max_tokens: int) -> tuple[str, int, int]:
        tokens = self._model.tokenize(prompt, add_bos=False, special=True)
        if len(tokens) + max_tokens > self.context:
            raise ValueError(f"prompt of {len(tokens)} tokens does not fit a context of {self.context}")
        self._context.kv_cache_clear()
        step = self._context._n_ubatch
        for start in range(0, len(tokens), step):
            chunk = tokens[start : start + step]
            batch = self._internals.make_batch_range(chunk, pos_start=start, logits_last=start + step >= len(tokens))
            failed = self._context.decode(batch)
            self._c.llama_batch_free(batch)
            if failed:
                raise RuntimeError(f"decode failed ({failed})")
        generated: list[int] = []
        position = len(tokens)
        for _ in range(max_tokens):
            token = int(np.argmax(self._logits()))
            if self._c.llama_token_is_eog(self._model.model, token):
                break
            generated.append(token)
            batch = self._internals.make_batch_single(token, position)
            failed = self._context.decode(batch)
            self._c.llama_batch_free(batch)
            if failed:
                break
            position += 1
        return self._model.detokenize(generated), len(tokens), len(generated)


def build_app(model: GreedyModel, name: str, log: Path | None) -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"model": name})

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        max_tokens = int(body.get("max_tokens") or 256)
        started = time.perf_counter()
        with model.lock:
            text, prompt_tokens, completion_tokens = model.complete(chatml(messages), max_tokens)
        seconds = time.perf_counter() - started
        if log is not None:
            record = {"system": messages[0]["content"][:60], "prompt_tokens": prompt_tokens,
                      "completion_tokens": completion_tokens, "seconds": round(seconds, 3)}  # fmt: skip
            with log.open("a", encoding="utf-8") as out:
                out.write(json.dumps(record) + "\n")
        return {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "model": name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    async def completions(request: Request) -> JSONResponse:
        from starlette.concurrency import run_in_threadpool

        try:
            body = await request.json()
            return JSONResponse(await run_in_threadpool(answer, body))
        except (ValueError, KeyError, TypeError) as error:
            return JSONResponse({"error": {"message": str(error)}}, status_code=400)

    return Starlette(routes=[Route("/health", health), Route("/v1/chat/completions", completions, methods=["POST"])])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, required=True)
    parser.add_argument("--runtime", type=Path, required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--name", default="qwen2.5-coder-1.5b-instruct")
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--log", type=Path)
    args = parser.parse_args()
    import uvicorn

    model = GreedyModel(args.model, args.runtime, args.context)
    uvicorn.run(build_app(model, args.name, args.log), host="127.0.0.1", port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
