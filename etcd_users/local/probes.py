"""What a member's plain HTTP listener says: whether it is healthy, whether it leads."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from etcd_users.local.member import Member
from etcd_users.reporting.exposition import fetch_metrics, metric_sum

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
    try:
        samples = fetch_metrics(f"{member.metrics_base_url}/metrics", timeout=1.0)
    except (urllib.error.URLError, OSError, ValueError):
        return False
    return metric_sum(samples, "etcd_server_is_leader") == 1


def _get(url: str, timeout: float = 1.0) -> str | None:
    try:
        with _DIRECT.open(url, timeout=timeout) as response:
            return response.read().decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ValueError):
        return None
