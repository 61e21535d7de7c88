"""The layers of the package, and the directions its imports may take between them.

The import graph is read from the source with ``ast``: every ``import`` counts, at module level,
inside a function (a lazy import) or under ``TYPE_CHECKING`` (a type-only import), because each of
them ties the importing module to the imported one.  A module imports only from its own layer or
the ones below; the few imports that go up are listed in ``UPWARD`` with their reason, and a new
one fails here.  So does a new circle of modules importing each other.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "memfit_jupyter"
NAME = "memfit_jupyter"

#: The layers, lowest first; a module is in the first layer one of whose prefixes names it or
#: its package.  ``""`` is the package's top (``memfit_jupyter/__init__.py``, which names
#: everything lazily).
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    # The event classes, the records, errors, secrets, what this process has used itself, the
    # working folder and the sandbox.
    ("base", ("errors", "event_base", "events", "records", "secrets", "known", "version", "workspace", "sandbox")),
    # What the engine shows the code that plugs into it: the Protocols of a run, its agent, clock
    # and tool runner; the extension hooks; the tools and their policy.
    ("interfaces", ("protocols", "extension", "tools", "tool_policy")),
    # The model client and the feature packages, each an extension of a run.
    ("mechanisms", ("llm", "reliability", "reflection", "memory", "context")),
    # The loop and what it is built of: settings, views of the events, the live world, replay,
    # forks, the trace and its schema.  Of jupyter/, the modules that import neither IPython nor
    # ipywidgets and that the engine's writers use: the widget protocol (the schema generates its
    # TypeScript), the facts and summaries of a trace, and the offline report (``Run.to_html``).
    ("engine", ("config", "timeline", "action_log", "steering", "run", "agent", "replay", "live", "fork", "trace",
                "schema", "jupyter.protocol", "jupyter.state", "jupyter.html", "jupyter.report")),
    # Applications of the engine, and what their command lines share.
    ("applications", ("study", "analysis", "compare", "catalogue", "sweep", "evaluate", "tasks", "trajectories",
                      "otel", "__main__", "terminal")),
    # Jupyter: the magics and widgets; and the package's top, which names all of the above.
    ("jupyter", ("jupyter", "")),
]

#: The imports allowed to go from a layer up to a higher one: (importer, imported) -> why.
UPWARD = {
    ("agent", "otel.live"): "Agent(otel=...) exports every run live; loaded only when asked for",
    ("sweep", "jupyter.sweep_widget"): "a sweep started in a notebook shows its progress widget there",
}

#: Circles that remain, each a set of modules; a new one, or one that grows, fails the test.
KNOWN_CIRCLES: list[set[str]] = []

#: At most this many imports go up (a few, each with its reason in UPWARD).
MAX_UPWARD = 3


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if "samples" in parts:  # data files of the trajectory readers' tests, not the package
            continue
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The module of the package that ``name`` (dotted, relative to the package) lands in."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name if name in MODULES else ("" if name == "" else None)


def imports_of(module: str) -> list[tuple[str, int]]:
    """(imported module, line) for every import of the package in ``module``'s source."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, int]] = []

    def add(dotted: str, line: int) -> None:
        if dotted != NAME and not dotted.startswith(NAME + "."):
            return
        target = _resolve(dotted[len(NAME) + 1:])
        if target is not None and target != module:
            found.append((target, line))

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package
                for _ in range(node.level - 1):
                    base = base.rpartition(".")[0]
                base = ".".join(p for p in (NAME, base, node.module or "") if p)
            else:
                base = node.module or ""
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                add(sub if sub[len(NAME) + 1:] in MODULES else base, node.lineno)
    return found


GRAPH = {m: sorted({t for t, _ in imports_of(m)}) for m in MODULES}


def layer_of(module: str) -> int:
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or (prefix and module.startswith(prefix + ".")):
                return i
    raise LookupError(f"{module} is in no layer: add it to LAYERS in tests/test_layers.py")


def circles(graph: dict[str, list[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in graph:
        if v not in index:
            visit(v)
    return found


def upward(graph: dict[str, list[str]]) -> set[tuple[str, str]]:
    return {(m, t) for m, targets in graph.items() for t in targets if layer_of(t) > layer_of(m)}


def test_every_module_has_a_layer():
    for module in MODULES:
        layer_of(module)


def test_imports_go_up_only_where_listed():
    found = upward(GRAPH)
    new = sorted(found - set(UPWARD))
    lines = [f"{m}:{line} imports {t} ({LAYERS[layer_of(m)][0]} -> {LAYERS[layer_of(t)][0]})"
             for m, t in new for target, line in imports_of(m) if target == t]
    assert not new, "imports from a lower layer up to a higher one:\n" + "\n".join(lines)
    assert len(found) <= MAX_UPWARD
    gone = sorted(set(UPWARD) - found)
    assert not gone, f"listed in UPWARD but no longer imported (take them out): {gone}"


def test_no_new_import_circles():
    found = circles(GRAPH)
    for component in found:
        assert any(component <= known for known in KNOWN_CIRCLES), (
            f"modules importing each other: {sorted(component)} (follow the layers: make one side a "
            "Protocol of protocols.py, or move what both need to the lower one)")


def test_the_feature_packages_see_a_run_only_through_its_protocols():
    """No extension, tool or view of the lower layers names the concrete Run or Agent."""
    engine = layer_of("run")
    for module, targets in GRAPH.items():
        if layer_of(module) < engine:
            assert not {"run", "agent", "replay", "fork"} & set(targets), module


def test_the_test_sees_every_kind_of_import():
    """The reader counts a type-only, a lazy and a relative import (else the checks above could
    pass on a graph that misses edges)."""
    assert "run" in GRAPH["agent"]                    # module level
    assert "protocols" in GRAPH["run"]                # under TYPE_CHECKING only
    assert "otel.live" in GRAPH["agent"]              # inside a method
    assert "jupyter.sweep_widget" in GRAPH["sweep"]   # relative, from a package's __init__
    assert circles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [{"a", "b", "c"}]


def test_litellm_is_imported_only_in_llm():
    offenders = []
    for module, path in MODULES.items():
        if module == "llm" or module.startswith("llm."):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            if any(n == "litellm" or n.startswith("litellm.") for n in names):
                offenders.append(f"{module}:{node.lineno}")
    assert offenders == []


def test_importing_the_engine_loads_no_store():
    code = ("import sys\nimport memfit_jupyter.run, memfit_jupyter.agent\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('memfit_jupyter.memory'))))\n"
            "import memfit_jupyter.memory\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('memfit_jupyter.memory'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    for line in out.stdout.splitlines():
        loaded = set(line.split())
        stores = {m for m in loaded if ".pg_" in m or m.endswith((".postgres", ".store", ".index", ".db",
                                                                    ".embedders"))}
        assert not stores, stores
        assert len(loaded) <= 6, loaded  # the package and its configs' modules, not the stores' 23
