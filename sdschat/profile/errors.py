"""Errors of the profile: one line each, naming the file, never a secret."""

from __future__ import annotations

__all__ = ["ProfileError", "TokenError"]


class ProfileError(Exception):
    """The profile is missing, damaged, or cannot be written."""


class TokenError(ProfileError):
    """An invite token that is truncated, altered, of another version, or not an invite at all."""
