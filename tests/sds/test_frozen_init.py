"""The engine's events and rows write their own ``__init__`` (sdschat.sds.frozen): they must stay what the
generated one made -- same parameters, same defaults, every field set, frozen, equal and hashable by value --
in the compiled build (where that ``__init__`` is compiled) and as Python (this file also runs there:
test_engine_build runs tests/sds on the Python sources)."""

from __future__ import annotations

import ast
import dataclasses
from types import FunctionType

import pytest

from sdschat.sds import events, frozen, native, state, wire
from sdschat.sds.wire import HistoryEntry


def _own_init(cls) -> bool:
    """``cls.__init__`` is written in its class (compiled: a builtin), not by the dataclasses module."""
    code = getattr(cls.__dict__.get("__init__"), "__code__", None)
    return "__init__" in cls.__dict__ and (code is None or code.co_filename != "<string>")


#: every frozen dataclass of the engine that writes its own __init__
OWN_INIT = [
    cls
    for mod in (events, state, wire)
    for cls in vars(mod).values()
    if isinstance(cls, type)
    and cls.__module__ == mod.__name__
    and dataclasses.is_dataclass(cls)
    and cls.__dataclass_params__.frozen
    and _own_init(cls)
]

_SAMPLES = {
    "str": "an-id",
    "str | None": "a-sender",
    "int": 7,
    "int | None": 8,
    "bytes": b"content",
    "bytes | None": b"hint",
    "bool": True,
    "tuple[str, ...]": ("w1", "w2"),
    "list[HistoryEntry]": [HistoryEntry("h1", b"x", "s1")],
    "HistoryEntry": HistoryEntry("h2", None, "s2"),
    "tuple[HistoryEntry, ...]": (HistoryEntry("h3"),),
}


def _source(cls) -> ast.ClassDef:
    """The class as its source writes it (a compiled class keeps neither its signature nor its field types)."""
    source = native.COMPILED_DIR.parent / (cls.__module__.rsplit(".", 1)[1] + ".py")
    tree = ast.parse(source.read_text(encoding="utf-8"))
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__name__)


def _values(cls) -> dict:
    """A value of its declared type for each field, none of them the field's default."""
    types = {n.target.id: ast.unparse(n.annotation) for n in _source(cls).body if isinstance(n, ast.AnnAssign)}
    return {f.name: _SAMPLES[types[f.name]] for f in dataclasses.fields(cls)}


def test_the_hot_classes_write_their_own_init_and_it_is_compiled_in_the_compiled_build():
    names = {cls.__name__ for cls in OWN_INIT}
    assert {
        "Delivered",
        "Missing",
        "Outgoing",
        "Acknowledged",
        "SyncReceived",
        "LogRow",
        "CacheRow",
        "MissingRow",
        "InRow",
        "OutRow",
        "HistoryEntry",
    } <= names
    assert frozen.COMPILED == native.BUILD.compiled, native.BUILD
    for cls in OWN_INIT:
        assert isinstance(cls.__init__, FunctionType) == (not frozen.COMPILED), cls


def _init_params(cls) -> list[tuple[str, object]]:
    """The parameters of ``cls.__init__`` as its source writes them: (name, default or MISSING), after ``self``."""
    init = next(n for n in _source(cls).body if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    args = init.args.args[1:]
    defaults = [dataclasses.MISSING] * (len(args) - len(init.args.defaults)) + [
        ast.literal_eval(d) for d in init.args.defaults
    ]
    assert not init.args.vararg and not init.args.kwarg and not init.args.kwonlyargs
    return [(a.arg, d) for a, d in zip(args, defaults)]


@pytest.mark.parametrize("cls", OWN_INIT, ids=lambda c: c.__name__)
def test_an_own_init_takes_the_fields_in_order_with_their_defaults(cls):
    """Written by hand, it must match the fields: a field added without its parameter would stay unset."""
    fields = dataclasses.fields(cls)
    assert [f.default_factory for f in fields] == [dataclasses.MISSING] * len(fields)
    want = [(f.name, f.default) for f in fields]
    got = _init_params(cls)
    assert got == want and [type(d) for _n, d in got] == [type(d) for _n, d in want]


@pytest.mark.parametrize("cls", OWN_INIT, ids=lambda c: c.__name__)
def test_an_own_init_sets_every_field_and_the_class_stays_a_frozen_value(cls):
    values = _values(cls)
    by_position = cls(*values.values())
    by_name = cls(**values)
    for obj in (by_position, by_name):
        assert {f.name: getattr(obj, f.name) for f in dataclasses.fields(cls)} == values
    assert by_position == by_name
    if not any(isinstance(v, list) for v in values.values()):  # (a list field makes an instance unhashable)
        assert hash(by_position) == hash(by_name)
    assert repr(by_position).startswith(f"{cls.__name__}(")
    first = dataclasses.fields(cls)[0].name
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(by_position, first, values[first])
    changed = dataclasses.replace(by_position, **{first: _other(values[first])})
    assert getattr(changed, first) == _other(values[first]) and changed != by_position
    required = {f.name: values[f.name] for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING}
    defaulted = cls(**required)
    for f in dataclasses.fields(cls):
        assert getattr(defaulted, f.name) == (values[f.name] if f.name in required else f.default)


def _other(value):
    return {
        str: "another",
        int: 9,
        bytes: b"other",
        bool: False,
        tuple: (),
        list: [],
        HistoryEntry: HistoryEntry("another"),
    }[type(value)]
