"""`basemessage` chains and cross-references, resolved on canonical raw objects.

Resolution runs after key spellings are normalized (so a base written with `metadata`
and an overlay written with `envelopemetadata` merge as one attribute) and before the
typed model is built (so the model sees one flat effective definition).

A message's *parent* is its cross-reference target (`meta.xref`, `xref` or the spec
example's `{"uri": ...}`) when it has one, else its `basemessage` (notes 1.1, 1.3):
- the parent is resolved first, then the message's own attributes are deep-merged over
  it (objects key by key, scalars and arrays replace, the derived message wins);
- when the derived message switches to another protocol, the inherited protocoloptions
  are dropped: options of one protocol mean nothing to another;
- a reference is an XID (`/messagegroups/g/messages/m`, optionally `/versions/v`: that
  version's attributes, the default one's being the message's), a `#/...` pointer, or
  an absolute URI under a loaded document, across all documents; a local reference that
  cannot name a message (a group, an endpoint) is an error;
- a dangling reference (missing, or into a registry we did not load) is a warning and the
  message is kept as written, flagged `incomplete`;
- a cycle is an error naming the chain; the messages on it are kept as written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gateway.definitions.located import Located, merge_located
from gateway.definitions.refs import is_absolute, is_message_xid, message_xid, to_xid
from gateway.spec.problems import Problems

MAX_DEPTH = 64  # far beyond any real chain; keeps hostile documents from exhausting the stack
_REFERENCE_KEYS = ("xref", "basemessage")


@dataclass(frozen=True)
class Resolved:
    loc: Located
    incomplete: bool = False
    chain: tuple[str, ...] = ()  # XIDs merged in, nearest first


class Resolver:
    def __init__(self, index: dict[str, Located], bases: Iterable[str], problems: Problems,
                 versioned: Mapping[str, str] | None = None):
        self._index = index
        # Messages written with versions -> their default version id: a reference to the
        # default version is the message; to another one, that version's entry in the
        # index (a missing one dangles). A message without versions has one, implicitly.
        self._versioned = dict(versioned or {})
        self._bases = tuple(bases)
        self._problems = problems
        self._done: dict[str, Resolved] = {}
        self._cycles: set[frozenset[str]] = set()

    def parent_of(self, xid: str) -> tuple[str, str] | None:
        """(reference key, raw reference) of a message's parent, if it names one."""
        data = self._index[xid].data
        for key in _REFERENCE_KEYS:
            if key in data:
                value = data[key]
                return (key, value) if isinstance(value, str) else (key, "")
        return None

    def target(self, ref: str) -> str | None:
        xid = to_xid(ref, self._bases) if ref else None
        if xid is None or xid in self._index:
            return xid
        message = message_xid(xid)
        default = self._versioned.get(message)
        if message != xid and default is not None and xid != f"{message}/versions/{default}":
            return xid  # a version the message does not have: dangling
        return message

    def own_or_inherited_protocol(self, xid: str) -> str | None:
        """The protocol a message states or inherits through its chain (own values only:
        group defaults are applied by the caller)."""
        seen: set[str] = set()
        current: str | None = xid
        while current is not None and current in self._index and current not in seen:
            seen.add(current)
            protocol = self._index[current].data.get("protocol")
            if isinstance(protocol, str):
                return protocol
            parent = self.parent_of(current)
            current = self.target(parent[1]) if parent else None
        return None

    def resolve(self, xid: str) -> Resolved:
        return self._resolve(xid, ())

    def _resolve(self, xid: str, stack: tuple[str, ...]) -> Resolved:
        done = self._done.get(xid)
        if done is not None:
            return done
        loc = self._index[xid]
        own = Located(dict(loc.data), dict(loc.origins))
        for key in _REFERENCE_KEYS:
            own.drop(key)
        parent = self.parent_of(xid)
        if parent is None:
            result = Resolved(own)
        else:
            result = self._with_parent(xid, own, parent, (*stack, xid))
        self._done[xid] = result
        return result

    def _with_parent(
        self, xid: str, own: Located, parent: tuple[str, str], chain: tuple[str, ...]
    ) -> Resolved:
        key, ref = parent
        where = self._index[xid].locate(key)
        target = self.target(ref)
        if not ref:
            self._problems.error(where.file, where.path, f"'{key}' must be a string reference",
                                 'write an XID such as "/messagegroups/g/messages/m"')
            return Resolved(own, incomplete=True)
        if target is not None and not is_message_xid(target):
            # A group, an endpoint, a collection: it can never be a message (rc2: "a
            # Resource, or Version, of type message").
            self._problems.error(where.file, where.path,
                                 f"{key} '{ref}' does not name a message (or a message "
                                 "version)",
                                 "reference a message: /messagegroups/<group>/messages/"
                                 "<message>[/versions/<version>]")
            return Resolved(own, incomplete=True)
        if target is None or target not in self._index:
            self._dangling(key, ref, target, where.file, where.path)
            return Resolved(own, incomplete=True)
        if target in chain:
            self._cycle((*chain[chain.index(target):], target), where.file, where.path)
            return Resolved(own, incomplete=True)
        if len(chain) >= MAX_DEPTH:
            self._problems.error(where.file, where.path,
                                 f"'{key}' chain is deeper than {MAX_DEPTH} messages",
                                 "shorten the chain of base messages")
            return Resolved(own, incomplete=True)
        base = self._resolve(target, chain)
        inherited = base.loc
        theirs, mine = inherited.data.get("protocol"), own.data.get("protocol")
        if mine is not None and theirs is not None and mine != theirs:
            inherited = Located(dict(inherited.data), dict(inherited.origins))
            inherited.drop("protocoloptions")
        return Resolved(merge_located(inherited, own), base.incomplete, (target, *base.chain))

    def _dangling(self, key: str, ref: str, target: str | None, file: str, path: str) -> None:
        if target is None and is_absolute(ref):
            message = (f"{key} '{ref}' points into a registry that was not loaded; "
                       "the definition is used without it")
            fix = "also load that registry or document, or copy the base message into this one"
        else:
            message = (f"{key} '{ref}' does not name a loaded message definition; "
                       "the definition is used without it")
            fix = "check the reference: /messagegroups/<group>/messages/<message>"
        self._problems.warning(file, path, message, fix)

    def _cycle(self, cycle: tuple[str, ...], file: str, path: str) -> None:
        members = frozenset(cycle)
        if members in self._cycles:
            return
        self._cycles.add(members)
        self._problems.error(
            file, path, f"basemessage cycle: {' -> '.join(cycle)}",
            "break the cycle: a message must not (indirectly) be its own base",
        )
