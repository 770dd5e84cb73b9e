"""The layering rules of docs/architecture.md, checked on the source itself."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OURS = {"runtime", "protocol", "devices", "models", "actors", "recording", "host", "sim", "bench"}
# What each package must not import (docs/architecture.md draws the same picture). bench/
# measures: nothing imports it but tests and its own ``mobagent bench`` entry point.
FORBIDDEN = {
    "runtime": (OURS - {"runtime"}) | {"adbutils", "cv2", "PIL", "jinja2", "starlette"},
    "protocol": OURS - {"protocol", "runtime"},
    "devices": OURS - {"devices", "runtime", "protocol"},
    "models": {"runtime", "actors", "sim", "devices", "recording", "host", "bench"},
    "actors": {"sim", "host", "recording", "bench"},
    "recording": {"actors", "models", "sim", "devices", "host", "bench", "adbutils"},
    "host": {"bench"},
    "sim": {"actors", "models", "recording", "host", "bench"},
    # A benchmark measures the product, not the test tree (stand-ins live in sim/).
    "bench": {"tests"},
}
# No shipped package imports the test tree.
for _rules in FORBIDDEN.values():
    _rules.add("tests")


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant):
                names.add(str(node.args[0].value).split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_respects_import_boundaries(package: str) -> None:
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = imported_packages(path) & FORBIDDEN[package]
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not offenders, "\n".join(offenders)


def test_checker_sees_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "x.py"
    bad.write_text("import sim.phone\nfrom models.ocr import Ocr\n")
    assert imported_packages(bad) >= {"sim", "models"}


def test_every_package_has_rules() -> None:
    assert set(FORBIDDEN) == OURS
    assert all((ROOT / name / "__init__.py").exists() for name in OURS)


def test_only_the_bench_command_points_into_bench() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    targets = {name: str(value) for group in project["entry-points"].values()
               for name, value in group.items()}
    targets |= {name: str(value) for name, value in project["scripts"].items()}
    into_bench = sorted(name for name, value in targets.items() if value.startswith("bench"))
    assert into_bench == ["bench"]
