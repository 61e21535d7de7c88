"""Settings of the magics: ``%config MemfitMagics.<name> = value``.

``MemfitSettings`` holds the traitlets; ``MemfitMagics`` (in ``magics``) inherits
them, so IPython's ``%config`` finds them under that name and ``%config
MemfitMagics`` prints each one with its help.  The defaults are explained in docs/MECHANISMS.md.
"""

from __future__ import annotations

import os
from pathlib import Path

from traitlets import Bool, CaselessStrEnum, Float, Int, Unicode
from traitlets.config import Configurable

#: The offline scripted model used when no model is configured anywhere.
FALLBACK_DEMO_MODEL = "memfit/demo"
MODEL_ENV = "MEMFIT_MODEL"
REFLECTION_CHOICES = ("auto", "none", "minimal", "standard", "deep", "critical")
STRATEGY_CHOICES = ("weighted", "consensus", "diverse")
STRUCTURED_CHOICES = ("auto", "tools", "schema", "text")


class MemfitSettings(Configurable):
    """Defaults for ``%%memfit_task``; each option of the magic overrides its setting."""

    model = Unicode(
        None, allow_none=True,
        help="Primary model: any litellm model string, or memfit/<scenario> for an offline "
             "scripted model. Unset: $MEMFIT_MODEL, then memfit/demo.",
    ).tag(config=True)
    fast_model = Unicode(
        None, allow_none=True,
        help="Fast tier, for cheap calls (sub-queries, samples). Unset: the primary model.",
    ).tag(config=True)
    fallback_model = Unicode(
        None, allow_none=True,
        help="Fallback tier, used while a tier's circuit breaker is open. Unset: none.",
    ).tag(config=True)
    api_base = Unicode(
        None, allow_none=True,
        help="Base URL of an OpenAI-compatible server (a local llama.cpp, vLLM or Ollama) for every "
             "tier, e.g. http://127.0.0.1:8080/v1. Unset: each provider's own.",
    ).tag(config=True)
    fast_api_base = Unicode(None, allow_none=True, help="Base URL for the fast tier only.").tag(config=True)
    fallback_api_base = Unicode(None, allow_none=True,
                                help="Base URL for the fallback tier only.").tag(config=True)
    structured = CaselessStrEnum(
        STRUCTURED_CHOICES, default_value="auto",
        help="How structured replies are asked for: tools (native tool calls), schema "
             "(response_format JSON schema), text (JSON in the reply, repaired); auto: by what "
             "litellm says the model supports.",
    ).tag(config=True)
    memory_path = Unicode(
        None, allow_none=True,
        help="Long-term memory store. Unset: the engine's default, .memfit/ in the kernel's "
             "working directory.",
    ).tag(config=True)
    max_iterations = Int(20, help="Most iterations a run may take.").tag(config=True)
    max_cost_usd = Float(1.0, help="Most a run may spend on model calls, in US dollars.").tag(config=True)
    max_duration_seconds = Float(300.0, help="Most a run may take, wall clock, in seconds.").tag(config=True)
    max_recursive_calls = Int(20, help="Most recursive (sub-query) calls a run may make.").tag(config=True)
    reflection = CaselessStrEnum(
        REFLECTION_CHOICES, default_value="auto",
        help="Reflection level: auto decides per action (docs/MECHANISMS.md §1.2); any other value forces it.",
    ).tag(config=True)
    strategy = CaselessStrEnum(
        STRATEGY_CHOICES, default_value="weighted",
        help="How recursive results are combined: weighted, consensus or diverse.",
    ).tag(config=True)
    throttle_ms = Int(
        100, help="The live widget re-renders at most this often while a run goes (0: every event).",
    ).tag(config=True)
    max_live_cards = Int(
        100, help="Iteration rows the live view keeps in the page while a run goes; older ones fold "
                  "into one line that shows them again (0: keep all). The saved output keeps every one.",
    ).tag(config=True)
    read_dotenv = Bool(True, help="Read API keys from a .env file in the working directory.").tag(config=True)
    otel_endpoint = Unicode(
        None, allow_none=True,
        help="Export every run live as OpenTelemetry spans: an OTLP/HTTP endpoint "
             "(http://127.0.0.1:6006 for Phoenix) or a file path (OTLP/JSON). Unset: only --otel.",
    ).tag(config=True)


def resolve_model(option: str | None, configured: str | None) -> tuple[str, str | None]:
    """The model to use and, when it was not chosen explicitly, a note saying where it came from.

    Order: the ``--model`` option, ``%config MemfitMagics.model``, ``$MEMFIT_MODEL``,
    then the offline demo scenario.
    """
    if option:
        return option, None
    if configured:
        return configured, None
    env = os.environ.get(MODEL_ENV, "").strip()
    if env:
        return env, f"model {env} from ${MODEL_ENV}"
    return FALLBACK_DEMO_MODEL, (
        f"no model given (--model, %config MemfitMagics.model or ${MODEL_ENV}): "
        f"using the offline scripted model {FALLBACK_DEMO_MODEL}"
    )


def load_dotenv_file(cwd: str | Path | None = None) -> bool:
    """Read ``.env`` in the working directory into the environment (existing variables win).

    Values are never printed or logged; only whether a file was read is returned.
    """
    path = Path(cwd or os.getcwd()) / ".env"
    if not path.is_file():
        return False
    from dotenv import load_dotenv

    return bool(load_dotenv(path, override=False))
