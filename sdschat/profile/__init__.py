"""The user's profile: config, one identity, channel keys and databases, invite tokens.

Imports :mod:`sdschat.crypto` only.
"""

from .errors import ProfileError, TokenError
from .names import public_broker, valid_name
from .profile import ChannelEntry, Notifications, Profile, ProfilePaths, resolve_paths
from .settings import SettingError, env_flag, env_home
from .token import MAX_EPOCH, TOKEN_PREFIX, Invite, decode_invite, encode_invite

__all__ = [
    "ChannelEntry",
    "Invite",
    "MAX_EPOCH",
    "Notifications",
    "Profile",
    "ProfileError",
    "ProfilePaths",
    "SettingError",
    "TOKEN_PREFIX",
    "TokenError",
    "decode_invite",
    "encode_invite",
    "env_flag",
    "env_home",
    "public_broker",
    "resolve_paths",
    "valid_name",
]
