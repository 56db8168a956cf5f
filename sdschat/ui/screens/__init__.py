"""Modal screens: help (keys, commands, glyph legend), stats and search."""

from .help import HelpScreen
from .search import SearchScreen
from .stats import StatsScreen

__all__ = ["HelpScreen", "SearchScreen", "StatsScreen"]
