# Type stub of the generated protobuf module (sds_pb2.py): for mypy and mypyc, which compiles the engine.
# It names the fields of proto/sds.proto with the types the protobuf runtime gives them (an absent optional field
# reads as its zero value; HasField tells it apart). The repeated fields and the descriptors are the runtime's own
# classes, known here only by what the project uses of them: mypyc treats every class of this stub as a plain
# Python object, so the compiled engine reads them as it always did.
from collections.abc import Iterable, Iterator, Mapping, Sequence

class _FieldDescriptor:
    name: str
    number: int
    has_presence: bool
    is_repeated: bool

class _Descriptor:
    name: str
    full_name: str
    fields: Sequence[_FieldDescriptor]

class _FileDescriptor:
    name: str
    package: str
    message_types_by_name: Mapping[str, _Descriptor]

class HistoryEntry:
    DESCRIPTOR: _Descriptor
    message_id: str
    retrieval_hint: bytes
    sender_id: str
    def __init__(
        self, *, message_id: str | None = ..., retrieval_hint: bytes | None = ..., sender_id: str | None = ...
    ) -> None: ...
    def HasField(self, field_name: str) -> bool: ...
    def SerializeToString(self, *, deterministic: bool = ...) -> bytes: ...
    def ParseFromString(self, serialized: bytes | bytearray | memoryview) -> int: ...
    def ByteSize(self) -> int: ...
    def ClearField(self, field_name: str) -> None: ...

class _HistoryEntries:
    """``repeated HistoryEntry``: the runtime's container of entries (not a list)."""

    def add(
        self, *, message_id: str | None = ..., retrieval_hint: bytes | None = ..., sender_id: str | None = ...
    ) -> HistoryEntry: ...
    def __iter__(self) -> Iterator[HistoryEntry]: ...
    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> HistoryEntry: ...
    def __delitem__(self, index: int | slice) -> None: ...

class Message:
    DESCRIPTOR: _Descriptor
    sender_id: str
    message_id: str
    channel_id: str
    lamport_timestamp: int
    bloom_filter: bytes
    content: bytes
    @property
    def causal_history(self) -> _HistoryEntries: ...
    @property
    def repair_request(self) -> _HistoryEntries: ...
    def __init__(
        self,
        *,
        sender_id: str | None = ...,
        message_id: str | None = ...,
        channel_id: str | None = ...,
        lamport_timestamp: int | None = ...,
        causal_history: Iterable[HistoryEntry] | None = ...,
        bloom_filter: bytes | None = ...,
        repair_request: Iterable[HistoryEntry] | None = ...,
        content: bytes | None = ...,
    ) -> None: ...
    def HasField(self, field_name: str) -> bool: ...
    def SerializeToString(self, *, deterministic: bool = ...) -> bytes: ...
    def ParseFromString(self, serialized: bytes | bytearray | memoryview) -> int: ...
    def ByteSize(self) -> int: ...
    def ClearField(self, field_name: str) -> None: ...

DESCRIPTOR: _FileDescriptor
