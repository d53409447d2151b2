"""Parent links between imported sessions (rotation chains, sub-agents), made inside each
session's transaction; chains of any depth and parent cycles handled without recursion.

A sub-agent (``ParsedSession.kind == "sub-agent"``, marked ``extra["sub_agent"]``) is its
parent's child but not a rotation: it is the root of its own tree, so it never joins the
parent's rotation chain, lineage or rotation tree."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce

from hermes_web.importers.base import ImportProblem, ParsedSession
from hermes_web.importers.graph import top_of
from hermes_web.models import Message, Session

_BATCH = 500
SUB_AGENT = "sub-agent"


def namespaced(tool_id: str, owner) -> str:
    """The public id of an imported session: the tool's id in this user's namespace.

    Always suffixed with the owner, so the id a user gets never depends on what other users
    imported (a collision would reveal that someone holds that id)."""
    return f"{tool_id}.{owner.pk}"


class Links:
    """Parent links of one import: each is made inside its session's own transaction.

    Children whose parent is not stored yet wait (by the tool's parent id) and are attached
    when it arrives, in this file or a later one. Which tree a session belongs to is tracked
    in memory (a union-find over tree tops), so a 3,000-deep chain in any order needs no
    recursion and no walk per link; a link that would close a cycle is refused, naming the
    ids, and its session is not stored. Trees that gained a waiting subtree get their
    ``root`` and depth rewritten level by level when the file is done (``finish``).

    An import that died before ``finish`` (a killed worker) leaves children linked but with
    their own root and depth 0: every import starts by finding such trees (``_unfinished``)
    and ``finish`` rewrites them too, so the next import of this user repairs them."""

    def __init__(self, owner) -> None:
        self.owner = owner
        self.waiting: dict[str, list[int]] = {}
        self.sub_agents: set[int] = set()  # waiting sessions that are sub-agents
        for pk, extra in (
            Session.objects.filter(owner=owner, parent__isnull=True, source__startswith="import:")
            .filter(extra__has_key="hermes_parent_id")
            .values_list("pk", "extra")
        ):
            self.waiting.setdefault(str(extra["hermes_parent_id"]), []).append(pk)
            if "sub_agent" in extra:
                self.sub_agents.add(pk)
        self.up: dict[int, int] = {}  # union-find: tree top -> the top it was attached under
        self.parent_of: dict[int, int] = {}  # sessions linked in this import
        self.names: dict[int, str] = {}
        self.dirty: set[int] = _unfinished(owner)

    def _top(self, pk: int) -> int:
        """The top of ``pk``'s tree, the path to it compressed (graph.top_of: a loop in the
        map, which ``link`` never makes, would stop the walk instead of spinning)."""
        up = self.up
        top = top_of(pk, lambda node: up[node] if up.get(node, node) != node else None)
        node = pk
        while node != top and up.get(node, node) != node:
            up[node], node = top, up[node]
        return top

    def link(self, session: Session, parsed: ParsedSession) -> None:
        """Inside the session's transaction: attach to its parent, then its waiting children."""
        session.root_id, session.compression_count = session.pk, 0
        self.names[session.pk] = parsed.public_id
        if parsed.parent_id:
            parent = (
                Session.objects.filter(
                    Q(public_id=namespaced(parsed.parent_id, self.owner))
                    | Q(public_id=parsed.parent_id, owner=self.owner)  # imported before namespaces
                )
                .only("pk", "root_id", "compression_count")
                .first()
            )
            if parent is not None and parsed.kind == SUB_AGENT:
                session.parent_id = parent.pk  # a child in a tree of its own
                _link_task_call(session.pk, parent.pk)
            elif parent is not None:
                session.parent_id = parent.pk
                root_id = parent.root_id or parent.pk
                session.root_id = root_id
                session.compression_count = parent.compression_count + 1
                if parent.pk not in self.parent_of and root_id != parent.pk:
                    self.up.setdefault(parent.pk, root_id)
        # touch(): updated_at is in the cache keys of the pages showing this session.
        session.touch(
            parent_id=session.parent_id,
            root_id=session.root_id,
            compression_count=session.compression_count,
        )
        rotated_from = session.parent_id if parsed.kind != SUB_AGENT else None
        top = self._top(rotated_from) if rotated_from else session.pk
        children = self.waiting.get(parsed.public_id, ())
        for child_pk in children:
            if child_pk in self.sub_agents:
                Session.objects.filter(pk=child_pk).touch(parent_id=session.pk)
                _link_task_call(child_pk, session.pk)
        children = [pk for pk in children if pk not in self.sub_agents]
        for child_pk in children:
            if self._top(child_pk) == top:
                raise ImportProblem(
                    "",
                    parsed.line,
                    f"parent cycle: {' → '.join(self._cycle(session, child_pk))}: refused",
                    parsed.public_id,
                )
        self.up[session.pk] = top
        if rotated_from:
            self.parent_of[session.pk] = rotated_from
        for child_pk in children:
            Session.objects.filter(pk=child_pk).touch(parent_id=session.pk)
            _link_task_call(child_pk, session.pk)
            self.up[child_pk] = top
            self.parent_of[child_pk] = session.pk
            self.dirty.add(top)

    def attached(self, parsed: ParsedSession) -> bool:
        """After ``link``, before ``stored``: whether the session got children (sessions
        waiting for it as their parent; a new session can have no others)."""
        return bool(self.waiting.get(parsed.public_id))

    def stored(self, session: Session, parsed: ParsedSession) -> None:
        """After the commit: the session's children are attached; it may wait for a parent."""
        self.waiting.pop(parsed.public_id, None)
        if parsed.parent_id and session.parent_id is None:
            self.waiting.setdefault(parsed.parent_id, []).append(session.pk)
            if parsed.kind == SUB_AGENT:
                self.sub_agents.add(session.pk)

    def rolled_back(self, session_pk: int | None) -> None:
        """The session's transaction failed: forget what ``link`` noted about it."""
        if session_pk is None:
            return
        for mapping in (self.up, self.parent_of, self.names):
            mapping.pop(session_pk, None)

    def finish(self) -> None:
        """Rewrite root and depth of every tree that gained a waiting subtree, top down."""
        for top in {self._top(t) for t in self.dirty}:
            level, depth, seen = [top], 0, {top}
            with transaction.atomic():
                while level:
                    for start in range(0, len(level), _BATCH):
                        Session.objects.filter(pk__in=level[start : start + _BATCH]).touch(
                            root_id=top, compression_count=depth
                        )
                    children = []
                    for start in range(0, len(level), _BATCH):
                        children += (
                            Session.objects.filter(parent_id__in=level[start : start + _BATCH])
                            .exclude(extra__has_key="sub_agent")  # trees of their own
                            .values_list("pk", flat=True)
                        )
                    level = [pk for pk in children if pk not in seen]  # stored data may loop
                    seen.update(level)
                    depth += 1
        self.dirty.clear()

    def _cycle(self, session: Session, child_pk: int) -> list[str]:
        """The tool ids around the cycle: this session, its ancestors up to ``child_pk``, it."""
        names = [self.names.get(session.pk, session.public_id)]
        current, seen = session.parent_id, {session.pk}
        while current and current not in seen:
            seen.add(current)
            if current not in self.names:
                row = Session.objects.filter(pk=current).values("parent_id", "extra").first()
                if row is None:
                    break
                self.names[current] = (row["extra"] or {}).get("source_id", str(current))
                if row["parent_id"]:
                    self.parent_of.setdefault(current, row["parent_id"])
            names.append(self.names[current])
            if current == child_pk:
                break
            current = self.parent_of.get(current)
        names.append(names[0])
        return names


def _unfinished(owner) -> set[int]:
    """Tops of this user's imported trees whose roots or depths were never rewritten: a
    session whose root is not its parent's, or whose depth is not its parent's plus one."""
    imported = Session.objects.filter(owner=owner, source__startswith="import:")
    broken = list(
        imported.filter(parent__isnull=False)
        .annotate(parent_root=Coalesce("parent__root_id", "parent_id"))
        .filter(
            Q(root_id__isnull=True)
            | ~Q(root_id=F("parent_root"))
            | ~Q(compression_count=F("parent__compression_count") + 1)
        )
        .values_list("pk", flat=True)[:10_000]
    )
    if not broken:
        return set()
    parent_of = dict(
        imported.filter(parent__isnull=False).values_list("pk", "parent_id").iterator()
    )
    return {top_of(pk, parent_of.get) for pk in broken}  # stored data may loop


def _link_task_call(child_pk: int, parent_pk: int) -> None:
    """A sub-agent session names the parent's Task call that spawned it, when it is found
    (Claude Code records the agent id on the Task call's result)."""
    extra = Session.objects.filter(pk=child_pk).values_list("extra", flat=True).first() or {}
    agent_id = (extra.get("claude_code") or {}).get("agent_id")
    if not agent_id:
        return
    call_id = (
        Message.objects.filter(session_id=parent_pk, extra__agent_id=agent_id)
        .values_list("tool_call_id", flat=True)
        .first()
    )
    if call_id:
        Session.objects.filter(pk=child_pk).touch(extra={**extra, "spawned_by_call": call_id})
