"""Serve a VLM with ``transformers serve`` (OpenAI-compatible chat completions).

``transformers serve`` loads a model's processor with ``AutoProcessor``, which for
Qwen-VL and SmolVLM also builds a video processor and so needs torchvision (which does
not import beside the CPU torch wheel this project pins). ``main`` runs the same
``transformers serve`` command (its uvicorn app, request handlers, generation) with one
change: processors are loaded without video (``loading.processor_class``), exactly as
the local backends load them. On a machine with torchvision, plain ``transformers
serve`` (or vLLM / SGLang) serves the same models.

``ServedModel`` starts that server as a child process on the loopback interface,
waits until it answers, and stops it: for tests and benchmarks.

    python -m embodied.reward.vlm.serve PATH --host 127.0.0.1 --port 8000
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from embodied.reward.vlm.loading import processor_class


def _load_processor(self: Any, model_id_and_revision: str, gguf_file: str | None = None) -> Any:
    """``ModelManager._load_processor`` for image-text-to-text models, without video."""
    model_id, revision = model_id_and_revision.split("@", 1)
    kwargs = {"revision": revision, "trust_remote_code": self.trust_remote_code}
    return processor_class(model_id, **kwargs).from_pretrained(model_id, **kwargs)


def main(argv: list[str] | None = None) -> None:
    """``transformers serve ARGS`` with processors loaded without video."""
    from transformers.cli.serving import model_manager
    from transformers.cli.transformers import app

    model_manager.ModelManager._load_processor = _load_processor
    app(["serve", *(sys.argv[1:] if argv is None else argv)], prog_name="transformers")


def free_port() -> int:
    """A TCP port nobody listens on at the moment, on the loopback interface."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServedModel:
    """``transformers serve`` of one model in a child process on 127.0.0.1 (a context manager).

    ``url`` is the OpenAI-compatible base URL (``http://127.0.0.1:<port>/v1``). ``model``:
    the model loaded at start and used for every request; None: each request names its
    model (a local folder or hub id), loaded on first use. ``start`` waits until
    ``/health`` answers (at most ``timeout`` seconds, else raises with the server's
    log); ``stop`` terminates the process and waits for it. ``env``: extra environment
    variables of the server process (e.g. ``OMP_NUM_THREADS``).
    """

    def __init__(self, model: str | Path | None, *, port: int | None = None, device: str = "cpu",
                 timeout: float = 120.0, log_path: str | Path | None = None,
                 env: dict[str, str] | None = None) -> None:
        self.model = None if model is None else str(model)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.device = device
        self.timeout = timeout
        self.log_path = Path(log_path) if log_path else None
        self.env = dict(env or {})
        self.process: subprocess.Popen | None = None
        self._log: Any = None

    def start(self) -> ServedModel:
        """Launch the server and wait for ``/health``; returns ``self``.

        Raises:
            RuntimeError: The server process exited before answering.
            TimeoutError: It did not answer within ``timeout`` seconds.
        """
        cmd = [sys.executable, "-m", "embodied.reward.vlm.serve",
               *([self.model] if self.model else []), "--host", "127.0.0.1",
               "--port", str(self.port), "--device", self.device, "--dtype", "float32"]
        env = {**os.environ, "HF_HUB_OFFLINE": "1", **self.env}
        self._log = open(self.log_path, "wb") if self.log_path else subprocess.DEVNULL  # noqa: SIM115
        self.process = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.stop()
                raise RuntimeError(f"the model server exited with code {self.process.returncode} "
                                   f"before answering ({' '.join(cmd)}); see {self.log_path}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2):
                    return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.3)
        self.stop()
        raise TimeoutError(f"the model server at {self.url} did not answer within "
                           f"{self.timeout:.0f} s ({' '.join(cmd)}); see {self.log_path}")

    def stop(self) -> None:
        """Terminate the server process (if running) and wait up to 20 s for it to exit."""
        proc = self.process
        if proc is not None and proc.poll() is None:
            proc.terminate()  # uvicorn shuts down on SIGTERM
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=20)
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if self._log not in (None, subprocess.DEVNULL):
            self._log.close()
        self._log = None

    def __enter__(self) -> ServedModel:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


if __name__ == "__main__":
    main()


__all__ = ["ServedModel", "free_port", "main"]
