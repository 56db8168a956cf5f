"""The layering of ARCHITECTURE.md, enforced: import-linter's contracts (pyproject.toml) and private names."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import sdschat

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = Path(sdschat.__file__).parent
#: what the store may import of the engine: its state types and what they are made of (``frozen``: how the rows
#: set their fields)
ENGINE_STATE_TYPES = {
    "sdschat.sds.state",
    "sdschat.sds.wire",
    "sdschat.sds.archive",
    "sdschat.sds.sds_pb2",
    "sdschat.sds.frozen",
    "sdschat.sds",
}


def _module(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _part(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_import_contracts_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint), "--no-cache", "--no-logo"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout, result.stdout


def test_the_store_contract_names_every_engine_module_but_the_state_types() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (store,) = [c for c in config["tool"]["importlinter"]["contracts"] if c.get("source_modules") == ["sdschat.store"]]
    engine = {_module(p) for p in (PACKAGE / "sds").rglob("*.py")}
    unlisted = engine - ENGINE_STATE_TYPES - set(store["forbidden_modules"])
    assert not unlisted, f"add to the store contract's forbidden_modules: {sorted(unlisted)}"


def _imported_names(path: Path):
    module = _module(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        if source.startswith("sdschat"):
            for alias in node.names:
                yield module, source, alias.name


def test_no_module_imports_another_packages_private_name() -> None:
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for module, source, name in _imported_names(path):
            private = name.startswith("_") and not name.startswith("__")
            private_module = any(p.startswith("_") and not p.startswith("__") for p in source.split("."))
            if (private or private_module) and _part(source) != _part(module):
                offenders.append(f"{module} imports {source}.{name}")
    assert not offenders, offenders
