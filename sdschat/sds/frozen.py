"""The engine's events and rows set their own fields: fast when compiled, as frozen as before.

Every event a channel returns and every row it keeps is a frozen dataclass,
made thousands of times a second at a node and millions of times in a
simulation. The ``__init__`` that ``@dataclass(frozen=True)`` writes sets each
field through ``object.__setattr__``, and it is written when the module is
imported, so mypyc never compiles it: ~1 us an event, about a fifth of the
engine's time receiving (``bench/engine_throughput.py``). A class that writes
its own ``__init__`` gets it compiled, and compiled code sets a field straight
into the instance (~60 ns; the class stays frozen: its ``__setattr__`` refuses
assignments from outside, as before). Running as Python (the engine's sources
uncompiled) that same ``self.x = x`` would be refused, so such an ``__init__``
asks :data:`COMPILED` and otherwise calls :func:`init`, which sets the fields
as the generated method does.
"""

from __future__ import annotations

from types import FunctionType
from typing import Any, Final

__all__ = ["COMPILED", "init"]


def _probe() -> None:
    """Compiled, a function is a builtin; as Python, a :class:`types.FunctionType`."""


#: this module runs compiled (mypyc), and so does every engine module (they are compiled together or not at all)
COMPILED: Final = not isinstance(_probe, FunctionType)

_set = object.__setattr__


def init(obj: Any, *values: Any) -> None:
    """Set the fields of the frozen dataclass instance ``obj``, in their declared order, to ``values``."""
    for name, value in zip(obj.__dataclass_fields__, values):
        _set(obj, name, value)
