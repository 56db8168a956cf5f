"""Widgets of the chat UI."""

from .chat_pane import ChatPane, StatusLine
from .impairment_panel import ImpairmentPanel
from .input_bar import ChatInput, CommandHint
from .message_view import MessageView
from .side_panel import SidePanel

__all__ = ["ChatPane", "StatusLine", "ImpairmentPanel", "ChatInput", "CommandHint", "MessageView", "SidePanel"]
