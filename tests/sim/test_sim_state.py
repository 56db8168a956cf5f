"""The shard's state is declared once (sdschat.sim.state.ShardState) and every part reads it from there."""

from __future__ import annotations

from sdschat.sim.delivery import Delivery
from sdschat.sim.network import Network
from sdschat.sim.params import SimParams
from sdschat.sim.plan import make_plan
from sdschat.sim.rows import EventRows
from sdschat.sim.shard import Shard
from sdschat.sim.state import ShardState
from sdschat.sim.stores import StoreClients

PARTS = (Network, Delivery, EventRows, StoreClients)


def _declared() -> set[str]:
    return set(ShardState.__annotations__)


def test_every_attribute_a_shard_sets_is_declared_once_in_the_base():
    p = SimParams(participants=6, messages=4, rate=2.0, loss=0.1, churn=(0.2, 2_000), stores=1, seed=3)
    shard = Shard(p, make_plan(p), 0, 2)
    shard.start()
    shard.run(p.start_ms + 5_000)
    assert set(vars(shard)) == _declared()  # nothing undeclared, nothing declared and never set
    for part in PARTS:
        assert issubclass(part, ShardState)
        assert not part.__dict__.get("__annotations__"), part  # no part declares state of its own


def test_the_declarations_add_no_class_attributes():
    """An instance reads its attributes as before: the base holds annotations only (its method declarations are
    for the type checker alone)."""
    assert not [name for name in vars(ShardState) if not name.startswith("__")]
    assert Shard.__mro__[1:6] == (*PARTS, ShardState)
