"""One schema per purpose, sent three ways: native tool calls, a JSON schema, or JSON in text.

``tools``   the schema is the parameters of one function the model must call
            (``tool_choice`` names it); the reply is the call's arguments.
``schema``  ``response_format={"type": "json_schema", ...}``: servers that constrain
            decoding with it (OpenAI, llama.cpp's grammar) always return schema-valid JSON.
``text``    the prompt asks for the JSON object; the reply is parsed and repaired.

``auto`` picks per model: what litellm says the model supports (tools, then
schema); a model litellm does not know behind a custom ``api_base`` (a local
OpenAI-compatible server: llama.cpp, vLLM, Ollama all constrain JSON) gets
``schema``; the scripted ``memfit/`` models and anything else get ``text``.
Every mode parses the reply with the same repair and validation, so the
scripted provider can answer in any of them.
"""

from __future__ import annotations

import copy
from typing import Any

MODES = ("tools", "schema", "text")
CHOICES = ("auto", *MODES)
#: The function a model calls in tools mode, per purpose (e.g. ``next_action``).
FUNCTION_PREFIX = "reply_"
#: Bounds that keep a small model from writing until its token cap (kept loose for large ones).
MAX_STRING = {"thought": 300, "action_type": 24, "tool": 60, "content": 400, "summary": 400, "answer": 2000,
              "lesson": 400, "code": 2000, "command": 400}
DEFAULT_MAX_STRING = 300
MAX_ITEMS = 3


def choose_mode(model: str, requested: str = "auto", custom_base: bool = False) -> str:
    """The structured mode for ``model``: ``requested`` unless it is ``auto`` (module docstring)."""
    if requested not in CHOICES:
        raise ValueError(f"structured must be one of {', '.join(CHOICES)}, got {requested!r}")
    if requested != "auto":
        return requested
    if model.startswith("memfit/"):
        return "text"
    from .backend import import_litellm

    litellm = import_litellm()
    try:
        known = bool(litellm.get_model_info(model))
    except Exception:
        known = False
    if known:
        try:
            if litellm.supports_function_calling(model):
                return "tools"
            if litellm.supports_response_schema(model):
                return "schema"
        except Exception:
            pass
        return "text"
    return "schema" if custom_base else "text"


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    """The schema with local ``$ref``s replaced by their definitions (not every server follows refs)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            return _inline(copy.deepcopy(defs[ref.rsplit("/", 1)[1]]), defs)
        return {k: _inline(v, defs) for k, v in node.items() if k not in ("$defs", "title")}
    if isinstance(node, list):
        return [_inline(v, defs) for v in node]
    return node


def _bound(node: Any, name: str = "") -> Any:
    if isinstance(node, dict):
        out = {k: (_bound(v, k) if k != "properties" else {p: _bound(s, p) for p, s in v.items()})
               for k, v in node.items()}
        if out.get("type") == "string" and "enum" not in out and "const" not in out:
            out.setdefault("maxLength", MAX_STRING.get(name, DEFAULT_MAX_STRING))
        if out.get("type") == "array":
            out.setdefault("maxItems", MAX_ITEMS)
        return out
    if isinstance(node, list):
        return [_bound(v, name) for v in node]
    return node


_PARAM_TYPES = {"str": {"type": "string"}, "int": {"type": "integer"}, "bool": {"type": "boolean"},
                "float": {"type": "number"}, "list": {"type": "array"}, "dict": {"type": "object"}}


def _tool_params(tool: Any) -> dict[str, Any]:
    props = {name: {**_PARAM_TYPES.get(p.type, {}), **({"description": p.description} if p.description else {})}
             for name, p in tool.params.items()}
    return {"type": "object", "properties": props,
            "required": [n for n, p in tool.params.items() if p.required]}


def wire_schema(purpose: str, schema_model: Any, tools: dict[str, Any] | None = None,
                mode: str = "schema") -> dict[str, Any]:
    """The JSON schema sent for ``purpose``: the pydantic schema, refs inlined, strings bounded.
    For ``action`` with known tools: in schema mode one branch per tool with that tool's own
    parameters (a constrained decoder then cannot invent a tool or a parameter); in tools
    mode (whose parameters must be one object) the tool names as an enum."""
    raw = schema_model.model_json_schema()
    schema = _bound(_inline(raw, raw.get("$defs", {})))
    if purpose == "action" and tools and mode == "tools":
        schema["properties"]["tool"] = {"type": "string", "enum": sorted(tools)}
    elif purpose == "action" and tools:
        base = {k: v for k, v in schema["properties"].items() if k not in ("tool", "params")}
        branches = []
        for name, tool in tools.items():
            branches.append({"type": "object",
                             "properties": {**base, "tool": {"type": "string", "enum": [name]},
                                            "params": _bound(_tool_params(tool))},
                             "required": ["thought", "action_type", "tool", "params"]})
        schema = {"anyOf": branches} if len(branches) > 1 else branches[0]
    return schema


def request_for(mode: str, purpose: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The litellm keyword arguments that ask for ``schema`` in ``mode``."""
    if mode == "tools":
        name = FUNCTION_PREFIX + purpose
        return {"tools": [{"type": "function", "function": {
                    "name": name, "description": f"Give the {purpose} reply.", "parameters": schema}}],
                "tool_choice": {"type": "function", "function": {"name": name}}}
    if mode == "schema":
        return {"response_format": {"type": "json_schema",
                                    "json_schema": {"name": purpose, "schema": schema, "strict": False}}}
    return {}
