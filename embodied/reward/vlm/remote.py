"""Ask a VLM behind an OpenAI-compatible endpoint the rows ``VlmChat`` answers locally.

The endpoint is a chat-completions server (vLLM, SGLang, ``transformers serve``).

A row (text parts and uint8 [H, W, 3] images, in order) becomes one user message with
the images inline as PNG data URLs; the answer is greedy (``temperature=0``) and at
most ``max_new_tokens`` long. ``generate`` sends all rows of a call concurrently, at
most ``max_in_flight`` at a time, and returns the answers in row order.

Failures: every request has a ``timeout`` and is retried up to ``retries`` times with
exponential backoff (the openai client's: connection errors, timeouts, 408/409/429 and
5xx answers). A request that still fails raises ``ServerError``, one line naming the
endpoint, the model and the cause (e.g. "connection refused").
"""

from __future__ import annotations

import base64
import io
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from embodied.reward.vlm.cache import Row


class ServerError(ConnectionError):
    """A request to the reward model server failed after its retries."""


def image_url(image: np.ndarray) -> str:
    """A uint8 [H, W, 3] image as a ``data:image/png;base64,...`` URL."""
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(image)).save(buf, format="PNG", compress_level=1)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def message_content(row: Row) -> list[dict[str, Any]]:
    """One row as OpenAI chat content parts: ``text`` and inline ``image_url`` parts."""
    parts: list[dict[str, Any]] = []
    for part in row:
        if isinstance(part, np.ndarray):
            parts.append({"type": "image_url", "image_url": {"url": image_url(part)}})
        else:
            parts.append({"type": "text", "text": str(part["text"])})
    return parts


class InFlight:
    """Counts requests in flight: the peak and the time-weighted mean while any were."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.peak = 0
        self.requests = 0
        self._area = 0.0
        self._busy = 0.0
        self._t = time.perf_counter()

    def _advance(self) -> None:
        t = time.perf_counter()
        if self.now:
            self._area += self.now * (t - self._t)
            self._busy += t - self._t
        self._t = t

    def enter(self) -> None:
        """Count one more request in flight."""
        with self.lock:
            self._advance()
            self.now += 1
            self.requests += 1
            self.peak = max(self.peak, self.now)

    def leave(self) -> None:
        """Count one request in flight fewer."""
        with self.lock:
            self._advance()
            self.now -= 1

    @property
    def mean(self) -> float:
        """Mean number of requests in flight over the time at least one was."""
        with self.lock:
            self._advance()
            return self._area / self._busy if self._busy else 0.0


class ServerChat:
    """Rows -> answers through an OpenAI-compatible server.

    ``url``: the base URL (``http://host:port/v1``). ``model``: the name the server
    knows the model by (vLLM: the served model name; ``transformers serve``: the path or
    hub id it loaded). ``api_key``: sent as a bearer token (servers started without one
    accept any). ``max_in_flight``: concurrent requests. ``timeout``: seconds per
    request. ``retries``: further attempts of a failed request.
    """

    def __init__(self, url: str, model: str, *, api_key: str | None = None,
                 max_in_flight: int = 8, timeout: float = 60.0, retries: int = 3,
                 system_prompt: str | None = None) -> None:
        try:
            import openai
        except ImportError as err:
            raise ImportError("a reward model server needs the openai client: "
                              "pip install -e '.[vlm]'") from err
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be >= 1, got {max_in_flight}")
        self.url = url.rstrip("/")
        self.model_name = model
        self.system_prompt = system_prompt
        self.max_in_flight = int(max_in_flight)
        self.client = openai.OpenAI(base_url=self.url, api_key=api_key or "EMPTY",
                                    timeout=float(timeout), max_retries=int(retries))
        self._errors = openai.OpenAIError
        self.pool = ThreadPoolExecutor(self.max_in_flight, thread_name_prefix="vlm-server")
        self.in_flight = InFlight()

    def _messages(self, row: Row) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": message_content(row)}]
        if self.system_prompt:
            messages.insert(0, {"role": "system", "content": self.system_prompt})
        return messages

    def _ask(self, messages: list[dict[str, Any]], max_new_tokens: int) -> str:
        self.in_flight.enter()
        try:
            out = self.client.chat.completions.create(
                model=self.model_name, messages=messages, max_tokens=max_new_tokens,
                temperature=0.0)
        except self._errors as err:
            cause = " ".join(str(err).split()) or type(err).__name__
            raise ServerError(f"reward model server {self.url} (model '{self.model_name}'): "
                              f"{type(err).__name__}: {cause}") from None
        finally:
            self.in_flight.leave()
        return (out.choices[0].message.content or "").strip()

    def generate(self, rows: Sequence[Row], max_new_tokens: int = 8) -> list[str]:
        """Greedy answers, one per row, in row order (see the module docstring)."""
        futures = [self.pool.submit(self._ask, self._messages(row), max_new_tokens)
                   for row in rows]
        try:
            return [f.result() for f in futures]
        finally:
            for f in futures:
                f.cancel()

    def close(self) -> None:
        """Cancel the requests not yet sent and close the HTTP client."""
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.client.close()


__all__ = ["InFlight", "ServerChat", "ServerError", "image_url", "message_content"]
