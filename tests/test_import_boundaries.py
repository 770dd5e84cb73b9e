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
# Single modules a package may import from a package it must not: the frame codecs are the
# project's one JPEG/PNG encoder, and models/ (the LLM client's images, perception's marked
# candidates) encode through them too. They stay a leaf (``LEAVES``), so models/ is still
# usable on its own. runtime.errors holds MobagentError, the one root of every exception the
# product raises, so every package imports it; it imports nothing. runtime.cpu_ledger charges
# a thread's CPU to a phone and stage (the OCR stages in models/ mark theirs); it imports
# nothing of ours either.
ALLOWED = {"models": {"devices.codecs", "runtime.errors", "runtime.cpu_ledger"}}
LEAVES = {"devices/codecs.py": OURS, "runtime/errors.py": OURS, "runtime/cpu_ledger.py": OURS}


def imported_modules(path: Path) -> set[str]:
    """Every absolute module name ``path`` imports, dotted in full."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module":
            if node.args and isinstance(node.args[0], ast.Constant):
                names.add(str(node.args[0].value))
    return names


def imported_packages(path: Path) -> set[str]:
    return {name.split(".")[0] for name in imported_modules(path)}


def forbidden_imports(path: Path, package: str) -> set[str]:
    allowed = ALLOWED.get(package, set())
    return {name.split(".")[0] for name in imported_modules(path)
            if name.split(".")[0] in FORBIDDEN[package] and name not in allowed}


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_respects_import_boundaries(package: str) -> None:
    offenders = []
    for path in sorted((ROOT / package).rglob("*.py")):
        bad = forbidden_imports(path, package)
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not offenders, "\n".join(offenders)


@pytest.mark.parametrize("leaf", sorted(LEAVES))
def test_allowed_modules_stay_leaves(leaf: str) -> None:
    assert not imported_packages(ROOT / leaf) & LEAVES[leaf], f"{leaf} imports our packages"


def test_an_allowance_is_one_module_not_its_package(tmp_path: Path) -> None:
    ok, bad = tmp_path / "ok.py", tmp_path / "bad.py"
    ok.write_text("from devices.codecs import encode_jpeg\n")
    bad.write_text("from devices.adb import AdbDevice\nfrom devices import codecs\n")
    assert forbidden_imports(ok, "models") == set()
    assert forbidden_imports(bad, "models") == {"devices"}


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


def runtime_names(path: Path) -> set[str]:
    """The identifiers ``path`` defines or uses (names, attributes, arguments, fields)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
    return names


# Words of phones, images and reports that no runtime identifier may contain.
ANDROID_WORDS = ("adb", "android", "screencap", "serials", "jpeg", "png", "image", "pixel",
                 "html")


def test_runtime_code_knows_nothing_of_android() -> None:
    """No import is not enough: runtime/ must not carry adb settings, image or HTML code
    either (the ``[fleet]`` section with the adb server's address lives in host/fleet.py)."""
    offenders = sorted(
        f"{path.relative_to(ROOT)}: {name}"
        for path in (ROOT / "runtime").rglob("*.py") for name in runtime_names(path)
        if any(word in name.lower() for word in ANDROID_WORDS))
    assert not offenders, "\n".join(offenders)


def test_the_android_check_sees_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "x.py"
    bad.write_text("class FleetConfig:\n    adb_port: int = 0\n")
    assert "adb_port" in runtime_names(bad)

