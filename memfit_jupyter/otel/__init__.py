"""OpenTelemetry export: a run as GenAI spans that Phoenix, Langfuse and any OTLP collector read.

::

    from memfit_jupyter import otel
    otel.export(run.trace(), path="run.otlp.json")             # OTLP/JSON file
    otel.export("run.json", endpoint="http://127.0.0.1:6006")   # OTLP/HTTP (Phoenix)
    Agent(model="memfit/spin-demo", otel="http://127.0.0.1:6006")   # live, while it runs

Spans follow the GenAI semantic conventions (``invoke_agent`` root per run,
an ``iteration N`` span each, ``chat`` per model call, ``execute_tool`` per
action) with ``openinference.span.kind``; memfit's findings travel as
``memfit.*`` attributes and span events (see ``spans`` and ``conventions``).
Message content only with ``content=True``, always redacted.

Needs the ``otel`` extra (``pip install 'memfit-jupyter[otel]'``): the SDK is
imported at first use, never by ``import memfit_jupyter``.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_EXPORTS = {
    # saved traces (not a module named "export": importing it would shadow the function)
    "export": ".saved", "spans": ".saved", "to_otlp_json": ".saved", "ExportResult": ".saved",
    "OtelExportError": ".saved", "load_trace": ".saved",
    "attach": ".live", "LiveExport": ".live", "ExportStats": ".live", "live_export_of": ".live",
    "read_otlp_json": ".otlp_json",
}
__all__ = sorted(_EXPORTS)

INSTALL_HINT = "OpenTelemetry export needs the otel extra: pip install 'memfit-jupyter[otel]'"


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'memfit_jupyter.otel' has no attribute {name!r}")
    try:
        loaded = import_module(module, __name__)
    except ModuleNotFoundError as exc:
        if (exc.name or "").startswith(("opentelemetry", "google")):
            raise ImportError(INSTALL_HINT) from None
        raise
    value = getattr(loaded, "read" if name == "read_otlp_json" else name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
