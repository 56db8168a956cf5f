"""The asyncio runtime of one participant (see :mod:`sdschat.node.node`)."""

from ..store import SearchQueryError
from .authored import open_authored, ordering_context, signer
from .book import nick_owners, shown_name
from .errors import MemberNotFound, MessageNotFound, NotAllowed, UserError
from .events import *  # noqa: F401,F403
from .node import MEMBERSHIP_KEY, Node, NodeConfig, NodeFailed, node_channel_config
from .payload import CONTROL_PREFIXES, QUIET_PREFIXES, AppPayload, PayloadError
from .search import SearchHit, match_spans, merge_hits, search_store

__all__ = [
    "CONTROL_PREFIXES",
    "QUIET_PREFIXES",
    "MEMBERSHIP_KEY",
    "Node",
    "NodeConfig",
    "NodeFailed",
    "node_channel_config",
    "AppPayload",
    "PayloadError",
    "SearchHit",
    "SearchQueryError",
    "match_spans",
    "merge_hits",
    "search_store",
    "nick_owners",
    "shown_name",
    "open_authored",
    "ordering_context",
    "signer",
    "UserError",
    "MemberNotFound",
    "MessageNotFound",
    "NotAllowed",
]
