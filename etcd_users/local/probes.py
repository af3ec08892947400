"""What a member's HTTP listeners say: whether it is healthy, whether it leads, its versions and raft indexes."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request

from etcd_users.exposition import Sample, fetch_metrics, metric_sum
from etcd_users.local.member import Member
from etcd_users.local.tls import ClusterTLS

# Health checks and scrapes go straight to 127.0.0.1, never through an http_proxy from the environment.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def is_healthy(member: Member) -> bool:
    body = _get(f"{member.metrics_base_url}/health")
    if body is None:
        return False
    try:
        return json.loads(body).get("health") == "true"
    except (ValueError, AttributeError):
        return False


def is_leader(member: Member) -> bool:
    samples = _metrics(member)
    return samples is not None and metric_sum(samples, "etcd_server_is_leader") == 1


def server_versions(member: Member, tls: ClusterTLS | None = None) -> tuple[str, str] | None:
    """etcd's /version on the client URL (the metrics listener has none): the server's version (``3.4.23``) and the
    cluster's (``3.4.0``); None when the member does not answer."""
    opener = _DIRECT
    if tls is not None:
        context = ssl.create_default_context(cafile=str(tls.ca_file))
        if tls.client_cert_auth and tls.client_cert_file and tls.client_key_file:
            context.load_cert_chain(str(tls.client_cert_file), str(tls.client_key_file))
        handler = urllib.request.HTTPSHandler(context=context)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}), handler)
    body = _get(f"{member.client_url}/version", opener=opener)
    try:
        answer = json.loads(body) if body is not None else None
        return (str(answer["etcdserver"]), str(answer["etcdcluster"])) if answer else None
    except (ValueError, KeyError, TypeError):
        return None


def raft_indexes(member: Member) -> tuple[int, int] | None:
    """The member's raft commit index and applied index, from the gauges of its /metrics (their names end in _total,
    their values are the indexes); None when it does not answer."""
    samples = _metrics(member)
    if samples is None:
        return None
    committed = metric_sum(samples, "etcd_server_proposals_committed_total")
    applied = metric_sum(samples, "etcd_server_proposals_applied_total")
    return int(committed), int(applied)


def peer_received_bytes(member: Member) -> int | None:
    """The bytes the member received from its peers (raft messages and snapshots), from its /metrics; None when it
    does not answer."""
    samples = _metrics(member)
    return None if samples is None else int(metric_sum(samples, "etcd_network_peer_received_bytes_total"))


def _metrics(member: Member) -> list[Sample] | None:
    """The member's /metrics samples; None when it does not answer."""
    try:
        return fetch_metrics(f"{member.metrics_base_url}/metrics", timeout=1.0)
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _get(url: str, timeout: float = 1.0, opener: urllib.request.OpenerDirector = _DIRECT) -> str | None:
    try:
        with opener.open(url, timeout=timeout) as response:
            return response.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ValueError):
        return None
