"""Optional dependencies: a command that needs the ``pipeline`` extra says so in one line."""

from __future__ import annotations

import importlib.util

from .errors import CliError

__all__ = ["PIPELINE_MODULES", "require_pipeline"]

# what `pip install 'sdschat[pipeline]'` adds (pyproject.toml), by import name
PIPELINE_MODULES = ("numpy", "pyarrow", "pyspark", "matplotlib")


def require_pipeline(what: str, modules: tuple[str, ...] = PIPELINE_MODULES) -> None:
    """Raise a one-line :class:`CliError` unless every module of ``modules`` can be imported."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise CliError(
            f"{what} needs the pipeline extra ({', '.join(missing)} not installed): pip install 'sdschat[pipeline]'"
        )
