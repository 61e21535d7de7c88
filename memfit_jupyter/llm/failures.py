"""What a failed model call means: litellm's exceptions mapped to kinds a run acts on.

Kinds, and what the run does with each::

    auth            no key, or the key was refused (401/403): the run ends at once,
                    naming the environment variable; no breaker counts it
    unknown_model   the provider does not serve this model (404): the run ends at once
    rate_limit      429: waits for Retry-After when the budget allows, then counts
    context_window  the prompt is longer than the model's window: the tiered context
                    flushes and the call is tried once more
    content_policy  the provider refused the content: the reply is unusable, not counted
    bad_request     400: our request is wrong, not the provider: not counted
    unreachable     connection refused: nothing listens at the address (a server that is
                    not running, a wrong port in api_base): counts; the run ends at once,
                    saying so, when no tier has another model to fall back to
    server_error    5xx, a dropped connection, a reply that is not JSON: counts
    timeout         the call ran past its timeout: counts
    other           anything else: counts, to be safe

Only the kinds in ``TIER_HEALTH_KINDS`` say "this tier is unhealthy" and count
toward opening its circuit breaker (``reliability/breakers.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import RunFailed

#: Failures that say the tier is unhealthy: they count toward opening its breaker.
TIER_HEALTH_KINDS = frozenset({"rate_limit", "timeout", "server_error", "unreachable", "other"})
#: Failures after which no later call of the run can succeed: the run ends at once.
FATAL_KINDS = frozenset({"auth", "unknown_model"})
#: Failures that are not the tier's fault: they neither open nor reset a breaker.
NOT_TIER_HEALTH_KINDS = frozenset({"auth", "unknown_model", "context_window", "content_policy",
                                   "bad_request"})
#: Longest Retry-After the client waits for (longer: the call counts as failed at once).
MAX_RETRY_AFTER_S = 60.0

# Texts by which a provider's own wording shows a missing key when litellm maps it to
# another exception type (openai's client: "Missing credentials", raised as a 500).
_MISSING_KEY_TEXTS = ("missing credentials", "api_key client option must be set", "no api key")
# ... and an overlong prompt that litellm left a plain 400 (servers word it their own way).
_CONTEXT_TEXTS = ("context_length_exceeded", "maximum context length", "exceeds the context window",
                  "exceed_context_size", "context window exceeded")
# ... and a refusal on content grounds (OpenAI's "safety system", Azure's "content management policy").
_POLICY_TEXTS = ("content_policy", "content policy", "safety system", "content management policy",
                 "content_filter")


@dataclass(frozen=True, slots=True)
class Failure:
    kind: str
    message: str
    #: Seconds the provider asked us to wait (a 429's Retry-After header), if it said.
    retry_after: float | None = None


class ProviderRejected(RunFailed):
    """A failure after which the run cannot go on (bad key, unknown model): ends it at once."""

    def __init__(self, kind: str, reason: str):
        super().__init__(reason)
        self.kind = kind


def key_names(model: str) -> list[str]:
    """The environment variables that hold the key for ``model`` (litellm's list, else a guess)."""
    from .loader import import_litellm

    litellm = import_litellm()
    try:
        missing = list(litellm.validate_environment(model).get("missing_keys") or [])
    except Exception:
        missing = []
    if missing:
        return missing
    try:
        provider = litellm.get_llm_provider(model)[1]
    except Exception:
        provider = model.split("/", 1)[0]
    return [f"{provider.upper()}_API_KEY"]


def missing_key_message(model: str, names: list[str]) -> str:
    return (f"no API key for {model}: set {' or '.join(names)} in the environment or in a .env file "
            "in the working directory")


def refused_key_message(model: str, names: list[str], detail: str) -> str:
    return (f"the provider refused the API key for {model} ({detail}): check {' or '.join(names)} "
            "in the environment or in the .env file of the working directory")


def _retry_after(exc: Exception) -> float | None:
    headers = getattr(exc, "litellm_response_headers", None) or getattr(
        getattr(exc, "response", None), "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after-ms")
    scale = 1000.0
    if value is None:
        value, scale = headers.get("retry-after"), 1.0
    try:
        seconds = float(value) / scale
    except (TypeError, ValueError):
        return None  # an HTTP date: rare from model providers; treated as "not said"
    return max(0.0, seconds)


def first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def unknown_model_message(model: str) -> str:
    return (f"unknown model {model!r}: litellm knows no provider for it "
            "(use provider/model, e.g. openai/gpt-4o-mini, or memfit/<scenario> offline)")


def _refused(exc: BaseException) -> bool:
    """Whether a connection was refused somewhere down ``exc``'s chain (litellm wraps the OSError
    of the HTTP client in its own exceptions, which say only "Connection error.")."""
    seen: BaseException | None = exc
    for _ in range(10):
        if seen is None:
            return False
        if isinstance(seen, ConnectionRefusedError) or "connection refused" in str(seen).lower():
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def unreachable_message(model: str, api_base: str | None) -> str:
    where = f"at {api_base} " if api_base else ""
    return (f"the server {where}is unreachable (connection refused) for {model}: "
            "is it running, and is the address right?")


def classify(exc: Exception, model: str) -> Failure:
    """The kind of a litellm exception for a call to ``model``, with a message a person can act on."""
    from .loader import import_litellm

    litellm = import_litellm()
    line = first_line(exc)
    lowered = str(exc).lower()
    if isinstance(exc, litellm.AuthenticationError | litellm.PermissionDeniedError):
        return Failure("auth", refused_key_message(model, key_names(model), line))
    if any(t in lowered for t in _MISSING_KEY_TEXTS):
        return Failure("auth", missing_key_message(model, key_names(model)))
    if isinstance(exc, litellm.ContextWindowExceededError):
        return Failure("context_window", f"the prompt is longer than {model}'s context window: {line}")
    if isinstance(exc, litellm.ContentPolicyViolationError):
        return Failure("content_policy", f"{model} refused the content: {line}")
    if "llm provider not provided" in lowered:
        return Failure("unknown_model", unknown_model_message(model))
    if isinstance(exc, litellm.NotFoundError):
        return Failure("unknown_model", f"unknown model {model!r}: the provider does not serve it ({line})")
    if isinstance(exc, litellm.RateLimitError):
        return Failure("rate_limit", line, _retry_after(exc))
    if isinstance(exc, litellm.Timeout):
        return Failure("timeout", line)
    if isinstance(exc, litellm.BadRequestError):
        if any(t in lowered for t in _CONTEXT_TEXTS):
            return Failure("context_window", f"the prompt is longer than {model}'s context window: {line}")
        if any(t in lowered for t in _POLICY_TEXTS):
            return Failure("content_policy", f"{model} refused the content: {line}")
        return Failure("bad_request", line)
    if _refused(exc):
        return Failure("unreachable", unreachable_message(model, None))
    if isinstance(exc, litellm.InternalServerError | litellm.ServiceUnavailableError
                  | litellm.APIConnectionError | litellm.BadGatewayError):
        return Failure("server_error", line)
    return Failure("other", line)
