"""Group APIs: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, List/DescribeGroups."""

from __future__ import annotations

from kafka.protocol.admin import (
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.consumer import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

from . import codes
from .api import RequestContext, handles
from .versions import schema_min_version


def _group_denied(ctx: RequestContext, group_id: str) -> bool:
    return not ctx.authorized("READ", "GROUP", group_id)


@handles(JoinGroupRequest, JoinGroupResponse, max_version=7)
async def join_group(ctx: RequestContext, request: JoinGroupRequest) -> JoinGroupResponse:
    if _group_denied(ctx, request.group_id):
        return JoinGroupResponse(
            throttle_time_ms=0,
            error_code=codes.GROUP_AUTHORIZATION_FAILED,
            generation_id=-1,
            protocol_name=None,
            leader="",
            member_id="",
            members=[],
        )
    if not request.group_id:
        return JoinGroupResponse(
            throttle_time_ms=0,
            error_code=codes.INVALID_GROUP_ID,
            generation_id=-1,
            protocol_name=None,
            leader="",
            member_id="",
            members=[],
        )
    rebalance_timeout = request.rebalance_timeout_ms if ctx.api_version >= 1 else request.session_timeout_ms
    peer = getattr(ctx.connection, "peer", "")
    result = await ctx.broker.groups.join(
        request.group_id,
        request.member_id,
        ctx.client_id or "",
        peer.rsplit(":", 1)[0],
        request.session_timeout_ms,
        rebalance_timeout,
        request.protocol_type,
        [(p.name, p.metadata) for p in request.protocols],
        request.group_instance_id if ctx.api_version >= 5 else None,
        require_member_id=ctx.api_version >= 4,
    )
    return JoinGroupResponse(
        throttle_time_ms=0,
        error_code=result.error_code,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name or ("" if ctx.api_version < 7 else None),
        leader=result.leader or "",
        member_id=result.member_id,
        members=[
            JoinGroupResponse.JoinGroupResponseMember(member_id=m, group_instance_id=i, metadata=md)
            for m, i, md in result.members
        ],
    )


@handles(SyncGroupRequest, SyncGroupResponse, max_version=5)
async def sync_group(ctx: RequestContext, request: SyncGroupRequest) -> SyncGroupResponse:
    if _group_denied(ctx, request.group_id):
        return SyncGroupResponse(
            throttle_time_ms=0, error_code=codes.GROUP_AUTHORIZATION_FAILED, assignment=b""
        )
    error, assignment = await ctx.broker.groups.sync(
        request.group_id,
        request.generation_id,
        request.member_id,
        {a.member_id: a.assignment for a in request.assignments},
    )
    group = ctx.broker.groups.groups.get(request.group_id)
    return SyncGroupResponse(
        throttle_time_ms=0,
        error_code=error,
        assignment=assignment,
        protocol_type=group.protocol_type if group else None,
        protocol_name=group.protocol_name if group else None,
    )


@handles(HeartbeatRequest, HeartbeatResponse, max_version=4)
def heartbeat(ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
    if _group_denied(ctx, request.group_id):
        return HeartbeatResponse(throttle_time_ms=0, error_code=codes.GROUP_AUTHORIZATION_FAILED)
    error = ctx.broker.groups.heartbeat(request.group_id, request.generation_id, request.member_id)
    return HeartbeatResponse(throttle_time_ms=0, error_code=error)


@handles(LeaveGroupRequest, LeaveGroupResponse, max_version=5)
def leave_group(ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
    if _group_denied(ctx, request.group_id):
        return LeaveGroupResponse(throttle_time_ms=0, error_code=codes.GROUP_AUTHORIZATION_FAILED, members=[])
    groups = ctx.broker.groups
    if ctx.api_version < 3:
        return LeaveGroupResponse(
            throttle_time_ms=0, error_code=groups.leave(request.group_id, request.member_id)
        )
    members = [
        LeaveGroupResponse.MemberResponse(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            error_code=groups.leave(request.group_id, m.member_id),
        )
        for m in request.members
    ]
    return LeaveGroupResponse(throttle_time_ms=0, error_code=codes.NONE, members=members)


_CommitTopic = OffsetCommitResponse.OffsetCommitResponseTopic
_CommitPartition = _CommitTopic.OffsetCommitResponsePartition


@handles(
    OffsetCommitRequest,
    OffsetCommitResponse,
    min_version=schema_min_version(OffsetCommitRequest),
    max_version=9,
)
def offset_commit(ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
    groups = ctx.broker.groups
    if _group_denied(ctx, request.group_id):
        group_error = codes.GROUP_AUTHORIZATION_FAILED
    else:
        group_error = groups.check_commit(
            request.group_id, request.generation_id_or_member_epoch, request.member_id
        )
    topics = []
    accepted = {}
    for topic in request.topics:
        topic_error = group_error or (
            codes.NONE if ctx.authorized("READ", "TOPIC", topic.name) else codes.TOPIC_AUTHORIZATION_FAILED
        )
        partitions = []
        for part in topic.partitions:
            error = topic_error
            if not error and ctx.broker.topics.get(topic.name, part.partition_index) is None:
                error = codes.UNKNOWN_TOPIC_OR_PARTITION
            if not error:
                accepted[(topic.name, part.partition_index)] = (
                    part.committed_offset,
                    part.committed_metadata,
                )
            partitions.append(_CommitPartition(partition_index=part.partition_index, error_code=error))
        topics.append(_CommitTopic(name=topic.name, partitions=partitions))
    if accepted:
        groups.commit_offsets(request.group_id, accepted)
    return OffsetCommitResponse(throttle_time_ms=0, topics=topics)


_FetchTopic = OffsetFetchResponse.OffsetFetchResponseTopic
_FetchPartition = _FetchTopic.OffsetFetchResponsePartition


@handles(
    OffsetFetchRequest, OffsetFetchResponse, min_version=schema_min_version(OffsetFetchRequest), max_version=7
)
def offset_fetch(ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
    if _group_denied(ctx, request.group_id):
        return OffsetFetchResponse(throttle_time_ms=0, topics=[], error_code=codes.GROUP_AUTHORIZATION_FAILED)
    committed = ctx.broker.groups.fetch_offsets(request.group_id)
    if request.topics is None:
        wanted: dict[str, list[int]] = {}
        for topic, partition in committed:
            wanted.setdefault(topic, []).append(partition)
    else:
        wanted = {t.name: list(t.partition_indexes) for t in request.topics}
    topics = []
    for name, partitions in wanted.items():
        allowed = ctx.authorized("DESCRIBE", "TOPIC", name)
        out = []
        for partition in partitions:
            offset, metadata = committed.get((name, partition), (-1, ""))
            out.append(
                _FetchPartition(
                    partition_index=partition,
                    committed_offset=offset if allowed else -1,
                    committed_leader_epoch=-1,
                    metadata=metadata if allowed else "",
                    error_code=codes.NONE if allowed else codes.TOPIC_AUTHORIZATION_FAILED,
                )
            )
        topics.append(_FetchTopic(name=name, partitions=out))
    return OffsetFetchResponse(throttle_time_ms=0, topics=topics, error_code=codes.NONE)


@handles(ListGroupsRequest, ListGroupsResponse, max_version=4)
def list_groups(ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
    states = set(request.states_filter or []) if ctx.api_version >= 4 else set()
    listed = [
        ListGroupsResponse.ListedGroup(
            group_id=g.group_id, protocol_type=g.protocol_type or "", group_state=g.state
        )
        for g in ctx.broker.groups.known_groups()
        if ctx.authorized("DESCRIBE", "GROUP", g.group_id) and (not states or g.state in states)
    ]
    return ListGroupsResponse(throttle_time_ms=0, error_code=codes.NONE, groups=listed)


@handles(DescribeGroupsRequest, DescribeGroupsResponse, max_version=5)
def describe_groups(ctx: RequestContext, request: DescribeGroupsRequest) -> DescribeGroupsResponse:
    out = []
    for group_id in request.groups:
        group = ctx.broker.groups.groups.get(group_id)
        if not ctx.authorized("DESCRIBE", "GROUP", group_id):
            out.append(
                DescribeGroupsResponse.DescribedGroup(
                    error_code=codes.GROUP_AUTHORIZATION_FAILED,
                    group_id=group_id,
                    group_state="",
                    protocol_type="",
                    protocol_data="",
                    members=[],
                )
            )
            continue
        if group is None:
            out.append(
                DescribeGroupsResponse.DescribedGroup(
                    error_code=codes.NONE,
                    group_id=group_id,
                    # a group known only by committed offsets is Empty; an unknown one is Dead
                    group_state="Empty" if group_id in ctx.broker.groups.offsets else "Dead",
                    protocol_type="",
                    protocol_data="",
                    members=[],
                )
            )
            continue
        members = [
            DescribeGroupsResponse.DescribedGroup.DescribedGroupMember(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                member_metadata=dict(m.protocols).get(group.protocol_name or "", b""),
                member_assignment=m.assignment,
            )
            for m in group.members.values()
        ]
        out.append(
            DescribeGroupsResponse.DescribedGroup(
                error_code=codes.NONE,
                group_id=group_id,
                group_state=group.state,
                protocol_type=group.protocol_type or "",
                protocol_data=group.protocol_name or "",
                members=members,
            )
        )
    return DescribeGroupsResponse(throttle_time_ms=0, groups=out)
