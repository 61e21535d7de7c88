"""The type check gives the same result on a base install as with every extra.

mypy reads an installed package's types and treats a missing one as untyped, so a module the
package imports from an optional extra would be checked one way here and another way on a base
install.  pyproject.toml reads every such module as untyped (``follow_imports = "skip"``): this
test fails when the package imports a third-party module that the base dependencies do not
bring and that list does not name.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "memfit_jupyter"


def _name(requirement: str) -> str:
    found = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    assert found, requirement
    return re.sub(r"[-_.]+", "-", found.group(1)).lower()


def _base_closure(requirements: list[str]) -> set[str]:
    """The distributions the base dependencies install, theirs included (extras left out)."""
    seen: set[str] = set()
    todo = [_name(r) for r in requirements]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            continue
        todo += [_name(r) for r in requires if "extra ==" not in r.replace('"', "").replace("'", "")]
    return seen


def _imported_modules() -> dict[str, str]:
    """Every absolute third-party module the package imports, with one file that imports it."""
    found: dict[str, str] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top != "memfit_jupyter" and top not in sys.stdlib_module_names:
                    found.setdefault(name, str(path.relative_to(ROOT)))
    return found


def test_every_module_of_an_optional_extra_is_read_as_untyped():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    skipped = {p.removesuffix(".*") for o in config["tool"]["mypy"].get("overrides", [])
               if o.get("follow_imports") == "skip" for p in o["module"]}
    base = _base_closure(config["project"]["dependencies"])
    providers = metadata.packages_distributions()
    modules = _imported_modules()
    assert "IPython.core.magic" in modules and "psycopg" in modules  # the scan sees imports

    def is_skipped(module: str) -> bool:
        return any(module == p or module.startswith(p + ".") for p in skipped)

    def from_base(module: str) -> bool:
        return any(_name(d) in base for d in providers.get(module.split(".")[0], []))

    unlisted = {m: where for m, where in modules.items() if not from_base(m) and not is_skipped(m)}
    assert not unlisted, ("imported from an optional extra but not read as untyped by mypy "
                          f"(add them to pyproject's follow_imports = \"skip\" list): {unlisted}")
