"""Modal screens: help (keys, commands, glyph legend), stats, search and the links of a message."""

from .help import HelpScreen
from .links import LinksScreen
from .search import SearchScreen
from .stats import StatsScreen

__all__ = ["HelpScreen", "LinksScreen", "SearchScreen", "StatsScreen"]
