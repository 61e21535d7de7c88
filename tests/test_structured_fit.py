"""A schema reply always closes before the output cap: ``fit_schema`` bounds the longest reply.

A grammar-constrained decoder (llama.cpp with ``response_format``) writes only what the
schema allows; if the longest such reply is longer than ``max_tokens``, the server stops
mid-object and the reply is not JSON.  The longest reply is measured here by building it:
every string at its ``maxLength``, every list at its ``maxItems``, every property present.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memfit_jupyter.llm.schemas import SCHEMAS
from memfit_jupyter.llm.structured import (
    INDENT,
    MIN_FITTED_STRING,
    fit_schema,
    longest_reply_chars,
    longest_reply_tokens,
    wire_schema,
)
from memfit_jupyter.tools import BUILTIN_TOOLS

TOOLS = {name: BUILTIN_TOOLS[name] for name in ("read_file", "python", "write_file", "finish")}


def schema_of(purpose: str) -> dict:
    return wire_schema(purpose, SCHEMAS[purpose], TOOLS if purpose == "action" else None)


def longest_instance(node: dict):
    """The longest JSON value ``node`` allows (the widest branch of an anyOf)."""
    if "anyOf" in node:
        return max((longest_instance(b) for b in node["anyOf"]), key=lambda v: len(json.dumps(v)))
    if "enum" in node:
        return max(node["enum"], key=lambda v: len(json.dumps(v)))
    kind = node.get("type")
    if kind == "string":
        return "x" * node["maxLength"]
    if kind == "array":
        return [longest_instance(node.get("items", {"type": "integer"})) for _ in range(node["maxItems"])]
    if kind == "object":
        return {k: longest_instance(v) for k, v in (node.get("properties") or {}).items()}
    if kind == "boolean":
        return False
    if kind == "null":
        return None
    return -0.12345678901234  # a number: well under the estimate for an unbounded value


def max_lengths(node, path=""):
    if isinstance(node, dict):
        found = {path: node["maxLength"]} if "maxLength" in node else {}
        for k, v in node.items():
            found.update(max_lengths(v, f"{path}/{k}"))
        return found
    if isinstance(node, list):
        return {k: v for i, x in enumerate(node) for k, v in max_lengths(x, f"{path}/{i}").items()}
    return {}


@pytest.mark.parametrize("purpose", sorted(SCHEMAS))
def test_the_estimate_is_at_least_the_longest_reply_written_out(purpose):
    for cap in (None, 128, 256, 1024):
        schema = fit_schema(schema_of(purpose), cap)
        assert len(json.dumps(longest_instance(schema), indent=INDENT)) <= longest_reply_chars(schema)


@settings(max_examples=60, deadline=None)
@given(purpose=st.sampled_from(sorted(SCHEMAS)), cap=st.integers(320, 4096))
def test_a_fitted_schema_s_longest_reply_fits_the_cap(purpose, cap):
    """From 320 tokens up (below, the structure of a reflection reply and the shortest strings are longer)."""
    original = schema_of(purpose)
    fitted = fit_schema(original, cap)
    assert longest_reply_tokens(fitted) <= cap
    before, after = max_lengths(original), max_lengths(fitted)
    assert before.keys() == after.keys()
    # strings only ever shrink, never below the floor (or their own bound, if that is lower)
    assert all(min(MIN_FITTED_STRING, before[k]) <= after[k] <= before[k] for k in before)


@pytest.mark.parametrize("purpose", sorted(SCHEMAS))
def test_a_schema_that_fits_or_has_no_cap_is_sent_as_it_is(purpose):
    schema = schema_of(purpose)
    assert fit_schema(schema, None) == schema
    roomy = int(longest_reply_tokens(schema)) + 1
    assert fit_schema(schema, roomy) == schema


def test_the_client_sends_the_schema_fitted_to_each_call_s_cap(tmp_path):
    """The request follows the call's final max_tokens: a lower cap, a tighter schema."""
    from memfit_jupyter import Agent

    run = Agent(model="memfit/demo", workdir=tmp_path, structured="schema", memory=False).start("x")
    wide = run.llm._request("reflection", "schema", 1024)["response_format"]["json_schema"]["schema"]
    narrow = run.llm._request("reflection", "schema", 400)["response_format"]["json_schema"]["schema"]
    assert longest_reply_tokens(narrow) <= 400 < longest_reply_tokens(wide)
    run.llm.max_output_tokens = 200  # the client's own ceiling lowers every call's cap
    result = run.run()
    calls = [e for e in run.trace()["events"] if e["type"] == "model_call"]
    assert result.status == "done" and calls and all(c["max_tokens"] <= 200 for c in calls)
