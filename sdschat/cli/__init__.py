"""The ``sdschat`` command line: parsing, wiring of parts, every entry point. Nothing imports it."""

from .errors import CliError
from .main import main

__all__ = ["main", "CliError"]
