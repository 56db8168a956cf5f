"""Layering (DESIGN.md): sdschat.sim -> sds only; sdschat.pipeline -> sim and store (read-only)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import sdschat.pipeline
import sdschat.sim

#: platformdirs: the user cache folder of the Spark class archive (pipeline/spark.py)
THIRD_PARTY = {"numpy", "pyarrow", "pyspark", "matplotlib", "rich", "google", "platformdirs"}


def _imports(package_dir: Path):
    for source in sorted(package_dir.rglob("*.py")):
        tree = ast.parse(source.read_text(), str(source))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield source, alias.name
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    yield source, "." * node.level + (node.module or "")
                else:
                    yield source, node.module


def _check(package, allowed_ours: set[str]) -> None:
    package_dir = Path(package.__file__).parent
    for source, name in _imports(package_dir):
        if name.startswith("."):
            assert not name.startswith(".."), (source.name, name)  # relative imports stay inside the package
            continue
        root = name.split(".")[0]
        if root == "sdschat":
            layer = ".".join(name.split(".")[:2])
            assert layer in allowed_ours, (source.name, name)
        else:
            assert root in THIRD_PARTY or root in sys.stdlib_module_names, (source.name, name)


def test_sim_imports_only_the_engine():
    _check(sdschat.sim, {"sdschat.sds", "sdschat.sim"})


def test_pipeline_imports_only_sim_and_store():
    _check(sdschat.pipeline, {"sdschat.sim", "sdschat.store", "sdschat.pipeline"})
