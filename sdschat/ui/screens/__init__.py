"""Modal screens: help (keys, commands, glyph legend) and stats."""

from .help import HelpScreen
from .stats import StatsScreen

__all__ = ["HelpScreen", "StatsScreen"]
