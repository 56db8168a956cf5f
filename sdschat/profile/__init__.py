"""The user's profile: config, one identity, channel keys and databases, invite tokens.

Imports :mod:`sdschat.crypto` only.
"""

from .errors import ProfileError, TokenError
from .profile import ChannelEntry, Notifications, Profile, ProfilePaths, resolve_paths, valid_name
from .token import TOKEN_PREFIX, Invite, decode_invite, encode_invite

__all__ = [
    "ChannelEntry", "Invite", "Notifications", "Profile", "ProfileError", "ProfilePaths", "TOKEN_PREFIX",
    "TokenError", "decode_invite", "encode_invite", "resolve_paths", "valid_name",
]
