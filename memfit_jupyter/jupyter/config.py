"""Settings of the magics: ``%config MemfitMagics.<name> = value``.

``MemfitSettings`` holds the traitlets; ``MemfitMagics`` (in ``magics``) inherits
them, so IPython's ``%config`` finds them under that name and ``%config
MemfitMagics`` prints each one with its help.  One traitlet per ``%%memfit_task`` option that
names one (``memfit_jupyter.config.OPTIONS``), made from the option's config field: its type,
default and help are the field's.  The traitlets of the display are written here.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from traitlets import Bool, CaselessStrEnum, Float, Int, TraitType, Unicode
from traitlets.config import Configurable

from ..config import DEFAULT_MODEL, OPTIONS, REFLECTION_CHOICES, Option
from ..llm.structured import CHOICES as STRUCTURED_CHOICES
from ..records import SynthesisStrategy
from .capture import MAX_LIVE_CARDS, THROTTLE_MS

#: The offline scripted model used when no model is configured anywhere.
FALLBACK_DEMO_MODEL = DEFAULT_MODEL
MODEL_ENV = "MEMFIT_MODEL"
STRATEGY_CHOICES = tuple(s.value for s in SynthesisStrategy)
__all__ = ["FALLBACK_DEMO_MODEL", "MODEL_ENV", "MemfitSettings", "REFLECTION_CHOICES", "STRATEGY_CHOICES",
           "STRUCTURED_CHOICES", "load_dotenv_file", "option_traits", "resolve_model"]


def _trait(opt: Option) -> TraitType[Any, Any]:
    text = opt.help.replace("`", "")
    default = opt.default
    if opt.setting == "model":  # unset, the model comes from the chain resolve_model() follows
        default, text = None, f"{text} Unset: ${MODEL_ENV}, then {DEFAULT_MODEL}."
    elif opt.default_text:
        text += f" Unset: {opt.default_text.replace('`', '')}."
    if opt.choices:
        return CaselessStrEnum(opt.choices, default_value=default, help=text).tag(config=True)
    kinds: dict[type, Callable[..., TraitType[Any, Any]]] = {int: Int, float: Float}
    kind = kinds.get(opt.type, Unicode)
    return kind(default, allow_none=default is None, help=text).tag(config=True)


def option_traits() -> dict[str, TraitType[Any, Any]]:
    """The traitlet of each ``%%memfit_task`` option that has one, by its name."""
    return {opt.trait: _trait(opt) for opt in OPTIONS if opt.trait}


_OptionSettings: type[Configurable] = type("_OptionSettings", (Configurable,),
                                           {"__module__": __name__, **option_traits()})


class MemfitSettings(_OptionSettings):  # type: ignore[misc, valid-type]
    """Defaults for ``%%memfit_task``; each option of the magic overrides its setting."""

    throttle_ms = Int(
        THROTTLE_MS, help="The live widget re-renders at most this often while a run goes (0: every event).",
    ).tag(config=True)
    max_live_cards = Int(
        MAX_LIVE_CARDS, help="Iteration rows the live view keeps in the page while a run goes; older ones fold "
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
