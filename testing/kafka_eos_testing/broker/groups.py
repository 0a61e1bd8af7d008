"""Consumer groups: membership (join/sync/heartbeat/leave) and committed offsets.

Kafka's classic group protocol, enough for librdkafka ``subscribe()`` and kafka-python's
``KafkaConsumer``: a rebalance waits until every known member has rejoined (or its rebalance
timeout passed), the first member to join leads and sends the assignments in SyncGroup, and
members that stop heartbeating are dropped after their session timeout. Offsets are kept per
group and, with a data directory, persisted to ``group-offsets.json``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
import uuid
from dataclasses import dataclass, field

from . import codes

log = logging.getLogger(__name__)

EMPTY, PREPARING_REBALANCE, COMPLETING_REBALANCE, STABLE = (
    "Empty",
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
)


@dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list[tuple[str, bytes]]
    group_instance_id: str | None = None
    last_heartbeat: float = field(default_factory=time.monotonic)
    assignment: bytes = b""
    join_future: asyncio.Future | None = None
    sync_future: asyncio.Future | None = None

    def expired(self, now: float) -> bool:
        return now - self.last_heartbeat > self.session_timeout_ms / 1000.0


@dataclass
class JoinResult:
    error_code: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass
class Group:
    group_id: str
    state: str = EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    rebalance_deadline: float = 0.0
    pending_join: set[str] = field(default_factory=set)
    # KIP-394: member ids handed out with MEMBER_ID_REQUIRED, valid for the rejoin that follows
    pending_member_ids: set[str] = field(default_factory=set)


class GroupCoordinator:
    """Every group lives on this node; one coordinator object serves them all."""

    def __init__(self, broker) -> None:
        self.broker = broker
        self.groups: dict[str, Group] = {}
        self.offsets: dict[str, dict[tuple[str, int], tuple[int, str | None]]] = {}
        self._task: asyncio.Task | None = None
        self._path = (
            os.path.join(broker.config.data_dir, "group-offsets.json") if broker.config.data_dir else None
        )
        self._load()

    # ------------------------------------------------------------------ offsets

    def commit_offsets(self, group_id: str, offsets: dict[tuple[str, int], tuple[int, str | None]]) -> None:
        """Store committed offsets (used by OffsetCommit and by transactional offset commits)."""
        self.offsets.setdefault(group_id, {}).update(offsets)
        self._save()

    def fetch_offsets(self, group_id: str) -> dict[tuple[str, int], tuple[int, str | None]]:
        return dict(self.offsets.get(group_id, {}))

    def _load(self) -> None:
        if self._path is None or not os.path.exists(self._path):
            return
        with open(self._path) as fh:
            raw = json.load(fh)
        for group_id, entries in raw.items():
            self.offsets[group_id] = {(t, int(p)): (o, m) for t, p, o, m in entries}

    def _save(self) -> None:
        if self._path is None:
            return
        payload = {
            g: [[t, p, o, m] for (t, p), (o, m) in entries.items()] for g, entries in self.offsets.items()
        }
        tmp = f"{self._path}.tmp"
        with open(tmp, "w") as fh:
            json.dump(payload, fh)
        os.replace(tmp, self._path)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._expire_loop())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(0.2)
            now = time.monotonic()
            for group in list(self.groups.values()):
                self._expire(group, now)

    def _expire(self, group: Group, now: float) -> None:
        if group.state == PREPARING_REBALANCE:
            # Members blocked in JoinGroup cannot heartbeat: only the ones that have not rejoined
            # can time out, by their session (as in Kafka) or by the rebalance deadline.
            late = now >= group.rebalance_deadline
            for member in [m for m in group.members.values() if m.member_id not in group.pending_join]:
                if late or member.expired(now):
                    log.info("group %s: member %s did not rejoin in time", group.group_id, member.member_id)
                    del group.members[member.member_id]
            if late or group.pending_join >= set(group.members):
                self._complete_join(group)
            return
        expired = [m for m in group.members.values() if m.expired(now)]
        for member in expired:
            log.info("group %s: member %s session expired", group.group_id, member.member_id)
            self._remove_member(group, member.member_id)

    # ------------------------------------------------------------------ membership

    def known_groups(self) -> list[Group]:
        """Groups with members or history, plus those known only by committed offsets (Empty)."""
        known = dict(self.groups)
        for group_id in self.offsets:
            known.setdefault(group_id, Group(group_id))
        return list(known.values())

    def group(self, group_id: str) -> Group:
        return self.groups.setdefault(group_id, Group(group_id))

    async def join(
        self,
        group_id: str,
        member_id: str,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        group_instance_id: str | None = None,
        *,
        require_member_id: bool = False,
    ) -> JoinResult:
        """``require_member_id`` (JoinGroup v4+, KIP-394): a dynamic member joining without an id
        first gets MEMBER_ID_REQUIRED with its new id and must join again with it, as in Kafka."""
        group = self.group(group_id)
        if not protocols or (group.protocol_type not in (None, protocol_type) and group.members):
            return JoinResult(codes.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if group.members and not self._common_protocol(group, [name for name, _ in protocols]):
            return JoinResult(codes.INCONSISTENT_GROUP_PROTOCOL, member_id=member_id)
        if not member_id and require_member_id and group_instance_id is None:
            member_id = f"{client_id}-{uuid.uuid4()}"
            group.pending_member_ids.add(member_id)
            return JoinResult(codes.MEMBER_ID_REQUIRED, member_id=member_id)
        if member_id in group.pending_member_ids:
            group.pending_member_ids.discard(member_id)
        elif member_id and member_id not in group.members:
            return JoinResult(codes.UNKNOWN_MEMBER_ID, member_id=member_id)
        if not member_id:
            member_id = f"{client_id}-{uuid.uuid4()}"
        member = group.members.get(member_id)
        if member is None:
            member = group.members[member_id] = Member(
                member_id,
                client_id,
                client_host,
                session_timeout_ms,
                rebalance_timeout_ms if rebalance_timeout_ms > 0 else session_timeout_ms,
                protocols,
                group_instance_id,
            )
        else:
            member.protocols = protocols
            member.session_timeout_ms = session_timeout_ms
        member.last_heartbeat = time.monotonic()
        group.protocol_type = protocol_type
        future = asyncio.get_running_loop().create_future()
        if member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(JoinResult(codes.UNKNOWN_MEMBER_ID, member_id=member_id))
        member.join_future = future
        if group.state != PREPARING_REBALANCE:
            self._prepare_rebalance(group)
        group.pending_join.add(member_id)
        if group.pending_join >= set(group.members):
            self._complete_join(group)
        return await future

    def _prepare_rebalance(self, group: Group) -> None:
        # A rebalance: sync waiters of the old generation learn it is over
        for member in group.members.values():
            if member.sync_future is not None and not member.sync_future.done():
                member.sync_future.set_result((codes.REBALANCE_IN_PROGRESS, b""))
        group.state = PREPARING_REBALANCE
        group.pending_join = set()
        timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        delay = self.broker.config.group_initial_rebalance_delay_ms if not group.generation_id else 0
        group.rebalance_deadline = time.monotonic() + max(timeout, delay) / 1000.0

    @staticmethod
    def _common_protocol(group: Group, extra: list[str] | None = None) -> str | None:
        candidates = (
            [name for name, _ in next(iter(group.members.values())).protocols] if group.members else extra
        )
        for name in candidates or []:
            if all(name in [p for p, _ in m.protocols] for m in group.members.values()) and (
                extra is None or name in extra
            ):
                return name
        return None

    def _complete_join(self, group: Group) -> None:
        if not group.members:
            group.state = EMPTY
            group.generation_id += 1
            group.leader = None
            return
        group.generation_id += 1
        group.protocol_name = self._common_protocol(group)
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.state = COMPLETING_REBALANCE
        group.pending_join = set()
        all_members = [
            (m.member_id, m.group_instance_id, dict(m.protocols).get(group.protocol_name, b""))
            for m in group.members.values()
        ]
        for member in group.members.values():
            member.last_heartbeat = time.monotonic()
            if member.join_future is not None and not member.join_future.done():
                member.join_future.set_result(
                    JoinResult(
                        codes.NONE,
                        group.generation_id,
                        group.protocol_type,
                        group.protocol_name,
                        group.leader,
                        member.member_id,
                        all_members if member.member_id == group.leader else [],
                    )
                )

    async def sync(
        self, group_id: str, generation_id: int, member_id: str, assignments: dict[str, bytes]
    ) -> tuple[int, bytes]:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return codes.UNKNOWN_MEMBER_ID, b""
        if generation_id != group.generation_id:
            return codes.ILLEGAL_GENERATION, b""
        if group.state == PREPARING_REBALANCE:
            return codes.REBALANCE_IN_PROGRESS, b""
        member = group.members[member_id]
        member.last_heartbeat = time.monotonic()
        if group.state == STABLE:
            return codes.NONE, member.assignment
        future = asyncio.get_running_loop().create_future()
        member.sync_future = future
        if member_id == group.leader:
            for mid, m in group.members.items():
                m.assignment = assignments.get(mid, b"")
            group.state = STABLE
            for m in group.members.values():
                if m.sync_future is not None and not m.sync_future.done():
                    m.sync_future.set_result((codes.NONE, m.assignment))
        return await future

    def heartbeat(self, group_id: str, generation_id: int, member_id: str) -> int:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return codes.UNKNOWN_MEMBER_ID
        group.members[member_id].last_heartbeat = time.monotonic()
        if group.state == PREPARING_REBALANCE:
            return codes.REBALANCE_IN_PROGRESS
        if generation_id != group.generation_id:
            return codes.ILLEGAL_GENERATION
        return codes.NONE

    def leave(self, group_id: str, member_id: str) -> int:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return codes.UNKNOWN_MEMBER_ID
        self._remove_member(group, member_id)
        return codes.NONE

    def _remove_member(self, group: Group, member_id: str) -> None:
        member = group.members.pop(member_id, None)
        group.pending_join.discard(member_id)
        if member is not None and member.join_future is not None and not member.join_future.done():
            member.join_future.set_result(JoinResult(codes.UNKNOWN_MEMBER_ID, member_id=member_id))
        if group.state == PREPARING_REBALANCE:
            if group.pending_join >= set(group.members):
                self._complete_join(group)
        elif group.members:
            self._prepare_rebalance(group)
        else:
            group.state = EMPTY
            group.leader = None

    def check_commit(self, group_id: str, generation_id: int, member_id: str) -> int:
        """May this member commit offsets now? (generation -1 = a simple, group-less commit)."""
        group = self.groups.get(group_id)
        if generation_id < 0 and not member_id:
            if group is not None and group.members:
                return codes.UNKNOWN_MEMBER_ID
            return codes.NONE
        if group is None or member_id not in group.members:
            return codes.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return codes.ILLEGAL_GENERATION
        if group.state == PREPARING_REBALANCE:
            return codes.REBALANCE_IN_PROGRESS
        group.members[member_id].last_heartbeat = time.monotonic()
        return codes.NONE
