"""The entry tree of a session: leaf, active branch, all branches.

Pi's rules (spec pi-host §5): the persisted leaf is the last tree node in file order;
the active branch walks `parentId` from the leaf through an id map in which a
duplicated id resolves to its LAST record; a missing parent ends the walk (the orphan
acts as a root). A parent cycle would make Pi loop forever: here it is detected and
reported as ``invalid_parent_graph`` instead, and the walk stops before repeating.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from .reader import EntryRecord

INVALID_PARENT_GRAPH = "invalid_parent_graph"


class Branch(msgspec.Struct, kw_only=True):
    """A root→leaf path of records."""

    leaf_id: str | None
    entries: list[EntryRecord]
    error: str | None = None  # INVALID_PARENT_GRAPH when the walk met a cycle

    @property
    def ids(self) -> list[str]:
        return [r.id for r in self.entries if r.id is not None]


class SessionTree:
    """Index over the valid records (string id, parentId null or string) of one file."""

    __slots__ = ("nodes", "by_id", "leaf_id", "_children", "_cycle_ids")

    def __init__(self, nodes: list[EntryRecord]) -> None:
        self.nodes = nodes  # valid records in file order
        self.by_id: dict[str, EntryRecord] = {}
        for rec in nodes:
            self.by_id[rec.id] = rec  # type: ignore[index]  # last duplicate wins
        self.leaf_id: str | None = nodes[-1].id if nodes else None
        self._children: dict[str | None, list[str]] | None = None
        self._cycle_ids: frozenset[str] | None = None

    @classmethod
    def from_records(cls, records: Iterable[EntryRecord]) -> SessionTree:
        return cls([r for r in records if r.valid])

    def branch(self, leaf_id: str | None = None) -> Branch:
        """The active path ending at `leaf_id` (default: the persisted leaf).

        An unknown `leaf_id` falls back to the persisted leaf, as Pi's
        buildSessionPath does. Never loops: a cycle ends the walk with an error.
        """
        start = leaf_id if leaf_id is not None and leaf_id in self.by_id else self.leaf_id
        if start is None:
            return Branch(leaf_id=None, entries=[])
        path: list[EntryRecord] = []
        seen: set[str] = set()
        error: str | None = None
        cur: str | None = start
        while cur is not None:
            rec = self.by_id.get(cur)
            if rec is None:
                break  # missing parent: the orphan acts as a root
            if cur in seen:
                error = INVALID_PARENT_GRAPH
                break
            seen.add(cur)
            path.append(rec)
            cur = rec.parent_id
        path.reverse()
        return Branch(leaf_id=start, entries=path, error=error)

    @property
    def children(self) -> dict[str | None, list[str]]:
        """parentId → child ids in file order (by resolved record, duplicates once)."""
        if self._children is None:
            kids: dict[str | None, list[str]] = {}
            for eid, rec in self.by_id.items():
                parent = rec.parent_id if rec.parent_id in self.by_id else None
                kids.setdefault(parent, []).append(eid)
            order = {eid: rec.line for eid, rec in self.by_id.items()}
            for lst in kids.values():
                lst.sort(key=lambda e: order[e])
            self._children = kids
        return self._children

    def leaves(self) -> list[str]:
        """Ids with no children, in file order of their records."""
        kids = self.children
        found = [eid for eid in self.by_id if eid not in kids]
        found.sort(key=lambda e: self.by_id[e].line)
        return found

    def all_branches(self) -> list[Branch]:
        """One branch per leaf, in file order of the leaves (the persisted leaf's branch
        is among them)."""
        return [self.branch(leaf) for leaf in self.leaves()]

    def cycle_ids(self) -> frozenset[str]:
        """Ids that lie on a parent cycle anywhere in the file (empty when acyclic)."""
        if self._cycle_ids is None:
            state: dict[str, int] = {}  # 1 = on current walk, 2 = done
            on_cycle: set[str] = set()
            for start in self.by_id:
                if start in state:
                    continue
                walk: list[str] = []
                cur: str | None = start
                while cur is not None and cur in self.by_id and cur not in state:
                    state[cur] = 1
                    walk.append(cur)
                    cur = self.by_id[cur].parent_id
                if cur is not None and state.get(cur) == 1:
                    idx = walk.index(cur)
                    on_cycle.update(walk[idx:])
                for w in walk:
                    state[w] = 2
            self._cycle_ids = frozenset(on_cycle)
        return self._cycle_ids

    @property
    def error(self) -> str | None:
        """``invalid_parent_graph`` when any parent cycle exists, else None."""
        return INVALID_PARENT_GRAPH if self.cycle_ids() else None
