"""SqlStore inherits every part of the store: no two parts (nor the facade) may define the same name, since
one would silently hide the other's method or attribute (whichever comes first in the MRO wins)."""
from __future__ import annotations

from typing import cast

from alertd.store.database import Database, Part
from alertd.store.facade import SqlStore
from alertd.store.inbox import Inbox

STAND_IN = cast(Database, object())  # the parts only keep it at construction


def own_names(cls: type) -> set[str]:
    """The names ``cls`` itself defines: methods and class attributes, annotations, and the attributes its
    own ``__init__`` sets (those set by the parts it builds on are theirs)."""
    names = {n for n in vars(cls) if not (n.startswith("__") and n.endswith("__"))}
    names |= set(vars(cls).get("__annotations__", {}))
    if "__init__" in vars(cls):
        inherited = set().union(*(vars(base(STAND_IN)) for base in cls.__mro__[1:] if issubclass(base, Part)))
        names |= set(vars(cls(STAND_IN))) - inherited
    return names


def clashes(store: type) -> dict[str, list[str]]:
    """Each name defined by more than one of ``store``'s classes (``Part`` and ``object`` aside), with them."""
    where: dict[str, list[str]] = {}
    for cls in store.__mro__:
        if cls in (Part, object):
            continue
        for name in own_names(cls):
            where.setdefault(name, []).append(cls.__name__)
    return {name: classes for name, classes in where.items() if len(classes) > 1}


def test_no_two_parts_of_the_store_define_the_same_name():
    assert clashes(SqlStore) == {}


def test_every_part_is_in_the_store():
    parts = [cls for cls in SqlStore.__mro__ if cls not in (SqlStore, Part, object)]
    assert all(issubclass(cls, Part) for cls in parts)
    assert Inbox in parts  # through the engine's steps and retention, which build on it


def test_a_name_two_parts_define_is_found():
    class Left(Part):
        def count(self) -> int:
            return 1

    class Right(Part):
        def __init__(self, db: Database):
            super().__init__(db)
            self.seen = 0

        def count(self) -> int:
            return 2

    class Below(Right):
        seen: int

    class Both(Left, Below):
        pass

    assert clashes(Both) == {"count": ["Left", "Right"], "seen": ["Below", "Right"]}
