"""The house rules of docs/CONTRIBUTING.md, measured on the product's source with ``ast``:
no import circles, one exception root, no function over 100 lines, one token estimator.
The simulator, the benchmarks and the tests are exempt."""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("runtime", "protocol", "devices", "models", "actors", "recording", "host")
MAX_FUNCTION_LINES = 100
# Builtin exceptions a product exception may also derive from (beside MobagentError).
BUILTIN_EXCEPTIONS = {name for name, value in vars(builtins).items()
                      if isinstance(value, type) and issubclass(value, BaseException)}


def product_modules(root: Path = ROOT) -> dict[str, Path]:
    mods = {}
    for package in PRODUCT:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            mods[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return mods


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the product modules it imports, ``TYPE_CHECKING`` and function-level
    imports included (a deferred import is still a circle)."""
    def known(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                deps.update(filter(None, (known(a.name) for a in node.names)))
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    dep = full if full in mods else known(base)
                    if dep:
                        deps.add(dep)
        deps.discard(mod)
        graph[mod] = deps
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def classes(mods: dict[str, Path]) -> dict[str, list[str]]:
    """Class name -> the last dotted part of each base, over the product."""
    bases: dict[str, list[str]] = {}
    for path in mods.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = [ast.unparse(b).split(".")[-1] for b in node.bases]
    return bases


def exception_roots(bases: dict[str, list[str]]) -> dict[str, set[str]]:
    """Each product exception class -> the product classes at the top of its ancestry."""
    def is_exception(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name in BUILTIN_EXCEPTIONS:
            return True
        return name in bases and name not in seen and any(
            is_exception(b, seen | {name}) for b in bases[name])

    def roots(name: str) -> set[str]:
        ours = [b for b in bases[name] if b in bases and is_exception(b)]
        return set().union(*(roots(b) for b in ours)) if ours else {name}

    return {name: roots(name) for name in bases if is_exception(name)}


def long_functions(mods: dict[str, Path], limit: int = MAX_FUNCTION_LINES) -> list[str]:
    found = []
    for mod, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > limit:
                    found.append(f"{mod}:{node.name} ({lines} lines)")
    return found


def test_no_import_circles_among_product_modules() -> None:
    assert circles(import_graph(product_modules())) == []


def test_every_product_exception_derives_from_mobagent_error() -> None:
    roots = exception_roots(classes(product_modules()))
    assert roots, "no exception classes found: the measurement is broken"
    assert {name: r for name, r in roots.items() if r != {"MobagentError"}} == {}


def test_no_product_function_is_over_100_lines() -> None:
    assert long_functions(product_modules()) == []


def test_one_token_estimator() -> None:
    defined = [f"{mod}:{node.name}" for mod, path in product_modules().items()
               for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.FunctionDef) and "estimate_tokens" in node.name]
    assert len(defined) == 1, defined


# The measurements themselves must be able to fail.

def test_a_circle_is_found(tmp_path: Path) -> None:
    (tmp_path / "runtime").mkdir()
    (tmp_path / "runtime" / "a.py").write_text("from runtime import b\n")
    (tmp_path / "runtime" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from runtime.a import X\n")
    assert circles(import_graph(product_modules(tmp_path))) == [["runtime.a", "runtime.b"]]


@pytest.mark.parametrize(("source", "bad"), [
    ("class E(ValueError): pass\n", {"E": {"E"}}),
    ("class R(Exception): pass\nclass E(R): pass\n", {"R": {"R"}, "E": {"R"}}),
    ("class MobagentError(Exception): pass\nclass E(MobagentError, OSError): pass\n", {}),
])
def test_a_second_exception_root_is_found(tmp_path: Path, source: str,
                                          bad: dict[str, set[str]]) -> None:
    (tmp_path / "runtime").mkdir()
    (tmp_path / "runtime" / "e.py").write_text(source)
    roots = exception_roots(classes(product_modules(tmp_path)))
    assert {n: r for n, r in roots.items() if r != {"MobagentError"}} == bad


def test_a_long_function_is_found(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "models" / "f.py").write_text(f"def f():\n{body}")
    assert long_functions(product_modules(tmp_path)) == ["models.f:f (101 lines)"]
