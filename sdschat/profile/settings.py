"""Settings from the environment: each variable read in one place, by one set of rules.

The profile's folder comes from ``--home``, else ``$SDSCHAT_HOME``, else the
platform's folders; :func:`env_home` is the one reader of ``$SDSCHAT_HOME``,
so the profile and the databases made outside a profile agree on where they
live, and an empty value is refused the same way everywhere.

A yes/no variable is read by :func:`env_flag`: ``1``, ``true``, ``yes`` and
``on`` mean yes; ``0``, ``false``, ``no`` and ``off`` mean no (in any case,
blanks around ignored); unset or empty means the variable's default. Anything
else is refused with one line naming the variable, because a setting that is
silently read as the opposite of what was meant (``off`` turning a switch on)
is worse than no setting at all.

The engine (``sdschat.sds``) imports nothing outside its own package, so it
cannot import this module: :mod:`sdschat.sds.native` reads its own two
variables (:data:`ENGINE_FLAGS`) with these same words, and a test holds the
two readers to the same answers. The command line checks every yes/no
variable of the project (:data:`FLAG_VARIABLES`) before it runs a command
(:func:`check_flags`), so a wrong value is one line there whichever part
would have read it later.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from .errors import ProfileError

__all__ = [
    "ENGINE_FLAGS",
    "FLAG_VARIABLES",
    "HOME_ENV",
    "NO_WORDS",
    "SPARK_CLASS_ARCHIVE_ENV",
    "SettingError",
    "YES_WORDS",
    "check_flags",
    "env_flag",
    "env_home",
    "parse_flag",
    "spark_class_archive",
]

#: the variable that puts the whole profile (config and data) in one folder
HOME_ENV = "SDSCHAT_HOME"
#: the words that mean yes, and those that mean no (compared in lower case)
YES_WORDS = frozenset({"1", "true", "yes", "on"})
NO_WORDS = frozenset({"0", "false", "no", "off"})
#: the engine's yes/no variables (read by ``sdschat.sds.native`` with the same words)
ENGINE_FLAGS = ("SDSCHAT_PURE_ENGINE", "SDSCHAT_HUGE_PAGES")
#: the pipeline's switch for the class-data archive its Spark JVM starts from (default yes); the pipeline cannot
#: import this module (it reads no profile): the command line reads it (:func:`spark_class_archive`) and passes
#: the answer to the job it starts
SPARK_CLASS_ARCHIVE_ENV = "SDSCHAT_SPARK_CLASS_ARCHIVE"
#: every yes/no variable of the project: the engine's, and the pipeline's switch for its class archive
FLAG_VARIABLES = (*ENGINE_FLAGS, SPARK_CLASS_ARCHIVE_ENV)


class SettingError(ProfileError):
    """An environment variable whose value cannot be read (a yes/no that is neither, an empty folder)."""


def parse_flag(name: str, value: str | None) -> bool | None:
    """``value`` of the variable ``name`` as yes (True) or no (False); None when it is unset or empty (the
    variable's default applies). :class:`SettingError` naming ``name`` for any other word."""
    if value is None or not value.strip():
        return None
    word = value.strip().lower()
    if word in YES_WORDS:
        return True
    if word in NO_WORDS:
        return False
    raise SettingError(f"{name}={value!r} is not yes or no: use 1/0, true/false, yes/no or on/off")


def env_flag(name: str, default: bool, environ: Mapping[str, str] | None = None) -> bool:
    """The yes/no variable ``name`` of ``environ`` (the process's environment by default), else ``default``."""
    parsed = parse_flag(name, (os.environ if environ is None else environ).get(name))
    return default if parsed is None else parsed


def check_flags(environ: Mapping[str, str] | None = None) -> None:
    """Refuse (:class:`SettingError`, one line) the first yes/no variable of :data:`FLAG_VARIABLES` that is set to
    something else."""
    env = os.environ if environ is None else environ
    for name in FLAG_VARIABLES:
        parse_flag(name, env.get(name))


def spark_class_archive(environ: Mapping[str, str] | None = None) -> bool:
    """Whether a Spark session the command line starts uses this machine's class-data archive:
    :data:`SPARK_CLASS_ARCHIVE_ENV`, default yes (:class:`SettingError` for a value that is neither)."""
    return env_flag(SPARK_CLASS_ARCHIVE_ENV, True, environ)


def env_home(environ: Mapping[str, str] | None = None) -> Path | None:
    """``$SDSCHAT_HOME`` as a folder, or None when it is unset. Set but empty is refused (:class:`SettingError`):
    it would put the profile in the current folder, or silently in the platform's."""
    env = os.environ if environ is None else environ
    if HOME_ENV not in env:
        return None
    if not env[HOME_ENV].strip():
        raise SettingError(f"{HOME_ENV} is set but empty: name a folder, or unset it")
    return Path(env[HOME_ENV])
