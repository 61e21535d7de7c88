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

A constrained decoder writes valid JSON only if it may finish: a reply cut off at
``max_tokens`` is not JSON at all.  ``fit_schema`` shrinks the strings' ``maxLength``
until the longest reply the schema allows fits the call's output cap (counting a token per
character inside strings), so a schema reply always closes before the cap.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel

    from ..tools import Tool


class StructuredMode(enum.StrEnum):
    """How structured replies are asked for (the module docstring); AUTO picks one per model."""

    AUTO = "auto"
    TOOLS = "tools"
    SCHEMA = "schema"
    TEXT = "text"


MODES = tuple(m.value for m in StructuredMode if m is not StructuredMode.AUTO)
CHOICES = tuple(m.value for m in StructuredMode)
#: The function a model calls in tools mode, per purpose (e.g. ``next_action``).
FUNCTION_PREFIX = "reply_"
#: Bounds that keep a small model from writing until its token cap (kept loose for large ones).
MAX_STRING = {"thought": 300, "action_type": 24, "tool": 60, "content": 400, "summary": 400, "answer": 2000,
              "lesson": 400, "code": 2000, "command": 400}
DEFAULT_MAX_STRING = 300
MAX_ITEMS = 3
#: Characters per output token assumed when fitting a schema to a cap.  The JSON around the
#: values (keys, braces, indents) is common text, 3 or more characters a token; inside a string a
#: small model can write a token per character (``"2;2;2;2;..."`` was seen), so one each.
STRUCTURE_CHARS_PER_TOKEN = 3.0
CONTENT_CHARS_PER_TOKEN = 1.0
#: The shortest a fitted string may become (a tool name or a short answer still fits).
MIN_FITTED_STRING = 12
#: The indent per level assumed of a model's layout (small models write their JSON pretty-printed).
INDENT = 4
#: Characters for a JSON value whose length the schema does not bound (numbers, free objects).
_UNBOUNDED_VALUE = 24


def choose_mode(model: str, requested: str = "auto", custom_base: bool = False) -> str:
    """The structured mode for ``model``: ``requested`` unless it is ``auto`` (module docstring)."""
    if requested not in CHOICES:
        raise ValueError(f"structured must be one of {', '.join(CHOICES)}, got {requested!r}")
    if requested != "auto":
        return requested
    if model.startswith("memfit/"):
        return "text"
    from .loader import import_litellm

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


def _tool_params(tool: Tool) -> dict[str, Any]:
    props = {name: {**_PARAM_TYPES.get(p.type, {}), **({"description": p.description} if p.description else {})}
             for name, p in tool.params.items()}
    return {"type": "object", "properties": props,
            "required": [n for n, p in tool.params.items() if p.required]}


def wire_schema(purpose: str, schema_model: type[BaseModel], tools: Mapping[str, Tool] | None = None,
                mode: str = "schema") -> dict[str, Any]:
    """The JSON schema sent for ``purpose``: the pydantic schema, refs inlined, strings bounded.
    For ``action`` with known tools: in schema mode one branch per tool with that tool's own
    parameters (a constrained decoder then cannot invent a tool or a parameter); in tools
    mode (whose parameters must be one object) the tool names as an enum."""
    raw = schema_model.model_json_schema()
    schema: dict[str, Any] = _bound(_inline(raw, raw.get("$defs", {})))
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


def _longest(node: Any, depth: int = 0) -> tuple[int, int]:
    """The longest JSON text ``node`` allows, as (characters of structure, characters of strings
    bounded by ``maxLength``): only the second shrinks when the schema is fitted.  The structure
    is counted as a model lays it out, one member a line, indented ``INDENT`` a level."""
    if not isinstance(node, dict):
        return _UNBOUNDED_VALUE, 0
    for key in ("anyOf", "oneOf"):
        if key in node:
            return max((_longest(branch, depth) for branch in node[key]), key=sum, default=(_UNBOUNDED_VALUE, 0))
    if "enum" in node or "const" in node:
        values = node.get("enum", [node.get("const")])
        return max(len(str(v)) + 2 for v in values), 0
    kind = node.get("type")
    line = 2 + INDENT * (depth + 1)  # a comma, a newline and the indent before each member
    if kind == "string":
        return (2, node["maxLength"]) if "maxLength" in node else (2 + DEFAULT_MAX_STRING, 0)
    if kind == "array":
        fixed, var = _longest(node.get("items", {}), depth + 1)
        n = node.get("maxItems", MAX_ITEMS)
        return 3 + INDENT * depth + n * (fixed + line), n * var
    if kind == "object":
        fixed, var = 3 + INDENT * depth, 0
        for name, sub in (node.get("properties") or {}).items():
            f, v = _longest(sub, depth + 1)
            fixed, var = fixed + len(name) + 4 + line + f, var + v  # "name": value
        return fixed, var
    if kind == "boolean":
        return 5, 0
    if kind == "null":
        return 4, 0
    return _UNBOUNDED_VALUE, 0


def longest_reply_chars(schema: dict[str, Any]) -> int:
    """The most characters a reply that fits ``schema`` can hold (unbounded parts estimated)."""
    return sum(_longest(schema))


def longest_reply_tokens(schema: dict[str, Any]) -> float:
    """The most output tokens a reply that fits ``schema`` can take (at the ratios above)."""
    fixed, var = _longest(schema)
    return fixed / STRUCTURE_CHARS_PER_TOKEN + var / CONTENT_CHARS_PER_TOKEN


def fit_schema(schema: dict[str, Any], max_tokens: int | None) -> dict[str, Any]:
    """``schema`` with its strings' ``maxLength`` scaled down (and, when the structure alone takes
    most of the cap, fewer items per list) so that its longest reply fits in ``max_tokens``
    (module docstring); unchanged when it already fits or there is no cap."""
    if not max_tokens:
        return schema
    fixed, var = _longest(schema)

    def structure(chars: int) -> float:
        return chars / STRUCTURE_CHARS_PER_TOKEN

    if longest_reply_tokens(schema) <= max_tokens:
        return schema
    for _ in range(8):
        if longest_reply_tokens(schema) <= max_tokens:
            break
        if max_items(schema) > 1 and (structure(fixed) > max_tokens * 0.6 or var == 0):
            # the structure alone takes most of the cap: one item fewer per list
            schema = _edit(schema, "maxItems", lambda n: max(1, n - 1))
        else:
            scale = max(0.0, (max_tokens - structure(fixed)) * CONTENT_CHARS_PER_TOKEN) / var if var else 1.0

            def shrink(n: int, k: float = scale) -> int:
                return max(min(MIN_FITTED_STRING, n), int(n * k))

            shrunk = _edit(schema, "maxLength", shrink)
            if shrunk == schema:  # the strings are at their floor: only fewer items are left
                if max_items(schema) <= 1:
                    break
                shrunk = _edit(schema, "maxItems", lambda n: max(1, n - 1))
            schema = shrunk
        fixed, var = _longest(schema)
    return schema


def max_items(node: Any) -> int:
    """The largest ``maxItems`` in ``node`` (0: it has no bounded list)."""
    if isinstance(node, dict):
        value = node.get("maxItems")
        own = value if isinstance(value, int) else 0
        return max([own, *(max_items(v) for v in node.values())])
    if isinstance(node, list):
        return max((max_items(v) for v in node), default=0)
    return 0


def _edit(node: Any, key: str, change: Callable[[int], int]) -> Any:
    """A copy of ``node`` with every integer ``key`` (maxLength, maxItems) passed through ``change``."""
    if isinstance(node, dict):
        out = {k: _edit(v, key, change) for k, v in node.items()}
        if isinstance(out.get(key), int):
            out[key] = change(out[key])
        return out
    if isinstance(node, list):
        return [_edit(v, key, change) for v in node]
    return node


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
