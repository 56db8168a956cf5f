"""The user's profile: a name, a broker, one identity for every channel, the channels' keys and databases.

Layout (``$SDSCHAT_HOME`` or ``--home DIR`` puts both folders in one)::

    <config>/profile.toml       name, broker URL, notification settings
    <data>/identity.key         the Ed25519 identity (base64 of the private key)
    <data>/channels.json        joined channels: name, key file, database, when joined, read up to; the one
                                the window last showed
    <data>/keys/<topic>.key     each channel's key (the key file format of sdschat keygen)
    <data>/db/<topic>.db        each channel's database
    <data>/inbox.json           ids of the inbox requests already shown (each is shown once)

Folders are 0700 and files 0600.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
import tomllib
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from sdschat.crypto import ChannelKey, CryptoError, Identity, KeyFileError, fingerprint
from sdschat.crypto.keyfile import read_key_file
from sdschat.crypto.sealed import is_sealed, open_private_key, seal_private_key, sealed_public_key

from .errors import ProfileError
from .files import private_dir, remove_quietly, write_private
from .names import public_broker, valid_name
from .session import ensure_session_id
from .settings import env_home
from .token import Invite

__all__ = ["ProfilePaths", "Profile", "ChannelEntry", "Notifications", "resolve_paths", "valid_name"]

PROFILE_VERSION = 1
#: days a broker keeps the window's session while it is closed ([session] keep_days)
SESSION_DAYS = 7.0
#: the default window of full event rows ([storage] events_keep; NodeConfig.events_keep's default too)
EVENTS_KEEP = 10_000
IDENTITY_HEADER = "sdschat-identity v1"


@dataclass(frozen=True)
class ProfilePaths:
    config: Path
    data: Path

    @property
    def profile_file(self) -> Path:
        return self.config / "profile.toml"


def resolve_paths(home: Path | None = None) -> ProfilePaths:
    """``home`` (``--home``), else ``$SDSCHAT_HOME``, else the platform's config and data folders. An empty
    ``$SDSCHAT_HOME`` is refused (it would put the profile in the current folder, or silently elsewhere)."""
    if home is None:
        home = env_home()
    if home is not None:
        return ProfilePaths(home, home)
    from platformdirs import user_config_dir, user_data_dir

    return ProfilePaths(Path(user_config_dir("sdschat")), Path(user_data_dir("sdschat")))


@dataclass
class Notifications:
    bell: bool = True
    desktop: bool = True
    #: words that count as naming you, besides your name
    highlight: tuple[str, ...] = ()


@dataclass
class ChannelEntry:
    name: str
    key_file: str
    db_file: str
    joined_ms: int
    read_ms: int = 0
    #: mentions here are highlighted and counted, but ring no bell and raise no notification
    muted: bool = False
    #: the channel's first admins (participant ids): its creator, or those the invite named
    admins: list[str] = field(default_factory=list)
    #: the key epoch the invite carried, ``[number, secret hex]``, until the channel's database has it
    invite_epoch: list[int | str] | None = None
    #: the members removed before we joined (from the invite): their frames are refused from the start
    removed: list[str] = field(default_factory=list)
    #: a two-member channel opened by name (``/query``): the other member's participant id; "" for others
    peer: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "key_file": self.key_file,
            "db_file": self.db_file,
            "joined_ms": self.joined_ms,
            "read_ms": self.read_ms,
            "muted": self.muted,
            "admins": list(self.admins),
            "invite_epoch": self.invite_epoch,
            "removed": list(self.removed),
            "peer": self.peer,
        }

    @property
    def epoch(self) -> tuple[int, bytes] | None:
        """The invite's key epoch (number, secret), if it carried one."""
        if not self.invite_epoch:
            return None
        return int(self.invite_epoch[0]), bytes.fromhex(str(self.invite_epoch[1]))


@dataclass
class Profile:
    paths: ProfilePaths
    name: str
    broker: str = ""
    notifications: Notifications = field(default_factory=Notifications)
    channels: dict[str, ChannelEntry] = field(default_factory=dict)
    #: event rows each channel's database keeps in full (the newest); older ones are compacted; 0 keeps all
    events_keep: int = EVENTS_KEEP
    #: in channels we administer, start a new key epoch when the current one is this many days old (0: never)
    rekey_days: float = 0.0
    #: the channel the window showed last (it reopens there); "" before the first window
    active: str = ""
    #: days an external broker keeps the window's session while it is closed, queueing what is sent meanwhile
    #: ([session] keep_days; 0: no kept session)
    session_days: float = SESSION_DAYS

    @property
    def session_expiry_s(self) -> int:
        return int(self.session_days * 86_400)

    # ------------------------------------------------------------ create / load

    @classmethod
    def exists(cls, paths: ProfilePaths) -> bool:
        return paths.profile_file.exists()

    @classmethod
    def create(cls, paths: ProfilePaths, name: str, broker: str = "", *, passphrase: str | None = None) -> Profile:
        """A new profile; with ``passphrase`` its identity key is sealed under it (scrypt + AES-256-GCM) and the
        nodes never copy it into a channel's database."""
        if cls.exists(paths):
            raise ProfileError(f"a profile already exists at {paths.profile_file}")
        profile = cls(paths, valid_name(name), broker)
        private_dir(paths.config)
        private_dir(paths.data)
        identity = Identity.generate()
        if passphrase is not None:
            text = seal_private_key(identity.private_bytes(), identity.public_bytes(), passphrase)
        else:
            text = f"{IDENTITY_HEADER}\n{base64.b64encode(identity.private_bytes()).decode('ascii')}\n"
        write_private(paths.data / "identity.key", text.encode("ascii"))
        ensure_session_id(paths.data)
        profile._save_channels()
        profile.save()
        return profile

    @classmethod
    def load(cls, paths: ProfilePaths) -> Profile:
        file = paths.profile_file
        try:
            doc = tomllib.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ProfileError(f"no profile at {file}: create one with `sdschat init --name NAME`") from None
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ProfileError(f"{file} is damaged ({str(exc).splitlines()[0]})") from None
        try:
            notify = doc.get("notifications", {})
            words = notify.get("highlight", [])
            if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
                raise TypeError
            profile = cls(
                paths,
                valid_name(str(doc["name"])),
                str(doc.get("broker", "")),
                Notifications(
                    bool(notify.get("bell", True)),
                    bool(notify.get("desktop", True)),
                    tuple(w.strip() for w in words if w.strip()),
                ),
            )
            keep = doc.get("storage", {}).get("events_keep", EVENTS_KEEP)
            if type(keep) is not int or keep < 0:
                raise ProfileError(f"{file}: [storage] events_keep must be a whole number >= 0 (0 keeps every event)")
            profile.events_keep = keep
            days = doc.get("security", {}).get("rekey_days", 0)
            if type(days) not in (int, float) or not 0 <= days <= 3650:
                raise ProfileError(f"{file}: [security] rekey_days must be a number of days from 0 (never) to 3650")
            profile.rekey_days = float(days)
            keep_days = doc.get("session", {}).get("keep_days", SESSION_DAYS)
            if type(keep_days) not in (int, float) or not 0 <= keep_days <= 365:
                raise ProfileError(
                    f"{file}: [session] keep_days must be a number of days from 0 (no kept session) to 365"
                )
            profile.session_days = float(keep_days)
        except (KeyError, TypeError, AttributeError):
            raise ProfileError(f'{file} is damaged (it needs at least name = "...")') from None
        profile.channels, profile.active = profile._load_channels()
        return profile

    def save(self) -> None:
        lines = [
            f"# sdschat profile (version {PROFILE_VERSION})",
            f"name = {_toml_str(self.name)}",
            f"broker = {_toml_str(self.broker)}",
            "",
            "[notifications]",
            f"bell = {str(self.notifications.bell).lower()}",
            f"desktop = {str(self.notifications.desktop).lower()}",
            f"highlight = [{', '.join(_toml_str(w) for w in self.notifications.highlight)}]",
            "",
            "[storage]",
            "# event rows kept in full per channel (older ones are compacted; 0 keeps all)",
            f"events_keep = {self.events_keep}",
            "",
            "[security]",
            "# in channels you administer, rotate the key when it is this many days old (0: never)",
            f"rekey_days = {self.rekey_days:g}",
            "",
            "[session]",
            "# days an external broker keeps what is sent while the window is closed (0: off)",
            f"keep_days = {self.session_days:g}",
            "",
        ]
        write_private(self.paths.profile_file, "\n".join(lines).encode("utf-8"))

    @property
    def rekey_every_ms(self) -> int:
        return int(self.rekey_days * 86_400_000)

    # ------------------------------------------------------------ identity

    def _identity_text(self) -> str:
        file = self.paths.data / "identity.key"
        try:
            return file.read_text(encoding="ascii")
        except FileNotFoundError:
            raise ProfileError(f"no identity at {file}: the profile is incomplete") from None
        except (OSError, UnicodeDecodeError):
            raise ProfileError(f"{file} is damaged") from None

    @property
    def protected(self) -> bool:
        """Whether the identity key is sealed under a passphrase (``sdschat init --protect``)."""
        return is_sealed(self._identity_text())

    @property
    def participant_id(self) -> str:
        """The identity's participant id (no passphrase needed: the public key is stored in the clear)."""
        text = self._identity_text()
        if not is_sealed(text):
            return self._plain_identity(text).participant_id
        try:
            return fingerprint(sealed_public_key(text))
        except KeyFileError:
            raise ProfileError(f"{self.paths.data / 'identity.key'} is damaged") from None

    def identity(self, passphrase: str | None = None) -> Identity:
        """The identity; a protected one needs its ``passphrase`` (:class:`ProfileError` without it, or wrong)."""
        text = self._identity_text()
        if not is_sealed(text):
            return self._plain_identity(text)
        if passphrase is None:
            raise ProfileError(
                "the identity is protected by a passphrase: set SDSCHAT_IDENTITY_PASSPHRASE, "
                "or run in a terminal to be asked"
            )
        try:
            return Identity.from_private_bytes(open_private_key(text, passphrase))
        except (KeyFileError, CryptoError, ValueError) as exc:
            raise ProfileError(f"{self.paths.data / 'identity.key'}: {exc}") from None

    def _plain_identity(self, text: str) -> Identity:
        """The identity of an unprotected ``identity.key`` (its text)."""
        try:
            header, b64 = text.strip().splitlines()
            if header.strip() != IDENTITY_HEADER:
                raise ValueError
            return Identity.from_private_bytes(base64.b64decode(b64, validate=True))
        except (ValueError, binascii.Error, CryptoError):
            raise ProfileError(f"{self.paths.data / 'identity.key'} is damaged") from None

    # ------------------------------------------------------------ channels

    def _channels_file(self) -> Path:
        return self.paths.data / "channels.json"

    def _load_channels(self) -> tuple[dict[str, ChannelEntry], str]:
        """The channels and the one the window showed last."""
        file = self._channels_file()
        try:
            doc = json.loads(file.read_text(encoding="utf-8"))
            channels = {c["name"]: ChannelEntry(**c) for c in doc["channels"]}
            active = doc.get("active", "")
            if not isinstance(active, str):
                raise TypeError
            return channels, active
        except FileNotFoundError:
            return {}, ""
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            raise ProfileError(f"{file} is damaged") from None

    def _save_channels(self) -> None:
        doc = {
            "version": PROFILE_VERSION,
            "active": self.active,
            "channels": [c.to_json() for c in self.channels.values()],
        }
        write_private(self._channels_file(), json.dumps(doc, indent=1, ensure_ascii=False).encode("utf-8"))

    def channel(self, name: str) -> ChannelEntry:
        try:
            return self.channels[unicodedata.normalize("NFC", name)]
        except KeyError:
            raise ProfileError(f"not in channel {name!r} (joined: {', '.join(self.channels) or 'none'})") from None

    def add_channel(
        self,
        name: str,
        secret: bytes,
        *,
        db: Path | None = None,
        admins: Iterable[str] | None = None,
        epoch: tuple[int, bytes] | None = None,
        removed: Iterable[str] = (),
        peer: str = "",
    ) -> ChannelEntry:
        """Join ``name`` with ``secret``: write its key file; its database is ``db`` or a new one. ``admins``
        (participant ids) are its trust root; None: a new channel, of which we are the admin. ``epoch``: the
        invite's current key epoch. ``peer``: the other member of a two-member channel opened by name."""
        name = valid_name(name, "channel name")
        if name in self.channels:
            raise ProfileError(f"already in channel {name!r}")
        key = ChannelKey(secret, name)
        stem = key.topic.rsplit("/", 1)[-1]
        key_file = self.paths.data / "keys" / f"{stem}.key"
        private_dir(key_file.parent)
        private_dir(self.paths.data / "db")
        try:
            key.write_key_file(key_file, overwrite=True)
        except CryptoError as exc:
            raise ProfileError(str(exc)) from None
        db_file = str(db) if db is not None else f"db/{stem}.db"
        entry = ChannelEntry(
            name,
            f"keys/{stem}.key",
            db_file,
            int(time.time() * 1000),
            admins=list(admins) if admins is not None else [self.participant_id],
            invite_epoch=[epoch[0], epoch[1].hex()] if epoch and epoch[0] > 0 else None,
            removed=list(removed),
            peer=peer,
        )
        self.channels[name] = entry
        self._save_channels()
        return entry

    def remove_channel(self, name: str, *, forget: bool = False) -> ChannelEntry:
        """Leave ``name``: forget its key; with ``forget`` its database too."""
        entry = self.channel(name)
        del self.channels[entry.name]
        self._save_channels()
        remove_quietly(self.paths.data / entry.key_file)
        if forget:
            db = self.db_path(entry)
            remove_quietly(db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm"))
        return entry

    def key(self, entry: ChannelEntry) -> ChannelKey:
        return ChannelKey(self._secret(entry), entry.name)

    def _secret(self, entry: ChannelEntry) -> bytes:
        try:
            return read_key_file(self.paths.data / entry.key_file)
        except CryptoError as exc:
            raise ProfileError(str(exc)) from None

    def db_path(self, entry: ChannelEntry) -> Path:
        path = Path(entry.db_file)
        return path if path.is_absolute() else self.paths.data / path

    def invite(
        self,
        name: str,
        *,
        admins: Iterable[str] | None = None,
        epoch: tuple[int, bytes] | None = None,
        removed: Iterable[str] | None = None,
        with_credentials: bool = False,
    ) -> Invite:
        """An invite to ``name``: its admins, current key epoch and removed members as the channel's node knows
        them (else the profile's: the first admins, the invite's epoch and removed members). Its broker is the
        profile's without the login and the CA file (:func:`public_broker`), unless ``with_credentials``."""
        entry = self.channel(name)
        number, secret = epoch if epoch is not None and epoch[0] > 0 else (entry.epoch or (0, b""))
        broker = self.broker if with_credentials else public_broker(self.broker)
        return Invite(
            entry.name,
            self._secret(entry),
            broker,
            tuple(sorted(admins if admins is not None else entry.admins)),
            number,
            secret,
            tuple(sorted(removed if removed is not None else entry.removed)),
        )

    def adopted_epoch(self, name: str) -> None:
        """The channel's database holds the invite's key epoch now: the profile forgets it (old keys are deleted
        after their retention window, and a copy here would outlive it)."""
        entry = self.channel(name)
        if entry.invite_epoch is not None:
            entry.invite_epoch = None
            self._save_channels()

    def direct_channel(self, peer: str) -> ChannelEntry | None:
        """The two-member channel opened by name with ``peer`` (a participant id), if we are in one."""
        return next((c for c in self.channels.values() if peer and c.peer == peer), None)

    def inbox_seen(self) -> dict[str, int]:
        """The inbox requests already shown: request id -> when it was made (``{}`` if the file is missing or
        damaged: a replay would then be shown once more, nothing worse)."""
        try:
            doc = json.loads((self.paths.data / "inbox.json").read_text(encoding="utf-8"))
            return {str(k): int(v) for k, v in doc["seen"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return {}

    def save_inbox_seen(self, seen: dict[str, int]) -> None:
        doc = {"version": PROFILE_VERSION, "seen": seen}
        write_private(self.paths.data / "inbox.json", json.dumps(doc).encode("utf-8"))

    def set_muted(self, name: str, muted: bool) -> None:
        entry = self.channel(name)
        if entry.muted != muted:
            entry.muted = muted
            self._save_channels()

    def mark_read(self, name: str, read_ms: int, *, save: bool = True) -> bool:
        """``name`` read up to ``read_ms``; whether that moved its read position (``save=False``: in memory until
        :meth:`save_channels`, for a window marking as the person reads)."""
        entry = self.channel(name)
        if read_ms <= entry.read_ms:
            return False
        entry.read_ms = read_ms
        if save:
            self._save_channels()
        return True

    def set_active(self, name: str) -> None:
        """The window shows ``name`` now: it reopens there (saved with the next write of the channels)."""
        self.active = self.channel(name).name

    def save_channels(self) -> None:
        self._save_channels()

    def opening_order(self) -> list[ChannelEntry]:
        """The channels, the one the window showed last first (the window starts it first and opens on it)."""
        entries = list(self.channels.values())
        first = self.channels.get(self.active)
        return [first, *(e for e in entries if e is not first)] if first is not None else entries


def _toml_str(text: str) -> str:
    """A TOML basic string (JSON's escapes are a subset of TOML's; DEL must be escaped too)."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")
