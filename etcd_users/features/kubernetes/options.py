"""Kubernetes-shaped traffic (``--etcd-k8s-*``): the objects, the read and write mixes and the nodes' leases of
``EtcdKubernetesUser`` and ``EtcdKubernetesNodeUser`` (``etcd_users.features.kubernetes``)."""

import re
from dataclasses import dataclass

from etcd_users.core.arguments import shown
from etcd_users.core.declare import (
    OptionGroup,
    SettingsError,
    list_items,
    option,
    parse_weights,
    positive,
    switch,
    zero_or_more,
)
from etcd_users.settings.connection import RAISE_LIMIT, REQUEST_OVERHEAD_BYTES

K8S_READS = ("get", "get-stale", "get-at-rev", "list-stale", "list-and-watch", "count")

K8S_WRITES = ("update", "delete", "create")

K8S_MAX_OBJECTS = 10_000_000  # per resource: the process keeps every object's revision in memory

K8S_MAX_NAMESPACES = 10_000  # ns-0000 … ns-9999

K8S_MAX_NODES = 1_000_000

# a Kubernetes resource is a lower-case DNS label (pods, configmaps, leases, …): the second segment of its keys
_K8S_RESOURCE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")


def parse_k8s_objects(text: str) -> tuple[tuple[str, int], ...]:
    """``pods:5000,configmaps:1000`` into (("pods", 5000), ("configmaps", 1000))."""
    objects: list[tuple[str, int]] = []
    for item in list_items("--etcd-k8s-objects", text, "RESOURCE:COUNT entries", "no objects, which no run can use"):
        resource, _, count = item.partition(":")
        resource = resource.strip()
        if not _K8S_RESOURCE.match(resource) or not count.strip().isdigit():
            raise SettingsError(
                f"--etcd-k8s-objects: {shown(item)} is not RESOURCE:COUNT with a lower-case resource name and a whole "
                "count; give e.g. pods:5000,configmaps:1000"
            )
        number = int(count)
        if not 1 <= number <= K8S_MAX_OBJECTS:
            raise SettingsError(
                f"--etcd-k8s-objects: {shown(item)} asks for {number} objects; give between 1 and {K8S_MAX_OBJECTS}"
            )
        if resource in (name for name, _ in objects):
            raise SettingsError(f"--etcd-k8s-objects: {resource!r} is listed twice; give each resource once")
        objects.append((resource, number))
    if not objects:
        raise SettingsError("--etcd-k8s-objects: give at least one RESOURCE:COUNT, e.g. pods:5000")
    return tuple(objects)


def parse_k8s_object_size(text: str) -> tuple[int, int]:
    """``2048:8192`` (uniform) or ``4096`` (fixed) into (smallest, largest)."""
    low, colon, high = text.strip().partition(":")
    if not colon:
        high = low
    if not (low.strip().isdigit() and high.strip().isdigit()) or int(low) > int(high):
        raise SettingsError(
            f"--etcd-k8s-object-size: {shown(text)} is not MIN:MAX with whole numbers, MIN at most MAX, nor one size; "
            "give e.g. 2048:8192 or 4096"
        )
    return int(low), int(high)


def _objects(_flag: str, text: str) -> tuple[tuple[str, int], ...]:
    return parse_k8s_objects(text)


def _object_size(_flag: str, text: str) -> tuple[int, int]:
    return parse_k8s_object_size(text)


def _at_most(most: int):
    def parse(flag: str, value: int) -> int:
        positive(flag, value)
        if value > most:
            raise SettingsError(f"{flag}: {shown(value)} is more than {most}; give at most {most}")
        return value

    return parse


def _read_mix(flag: str, text: str) -> tuple[tuple[str, float], ...]:
    return parse_weights(flag, text, K8S_READS, "get:5,list-and-watch:80")


def _write_mix(flag: str, text: str) -> tuple[tuple[str, float], ...]:
    return parse_weights(flag, text, K8S_WRITES, "update:90,delete:5,create:5")


@dataclass(frozen=True, kw_only=True)
class KubeSettings(OptionGroup):
    TITLE = "etcd Kubernetes traffic"
    DESCRIPTION = "EtcdKubernetesUser and EtcdKubernetesNodeUser: objects, mixes and the nodes' leases"
    SLICE = "k8s"

    objects: tuple[tuple[str, int], ...] = option(
        "--etcd-k8s-objects",
        "pods:5000,configmaps:1000,leases:200",
        "Objects of the Kubernetes workload as RESOURCE:COUNT,…, written before the run (only the missing ones) "
        "under PREFIX/RESOURCE/NAMESPACE/NAME.",
        parse=_objects,
    )
    namespaces: int = option(
        "--etcd-k8s-namespaces",
        10,
        "Namespaces the objects of each resource are spread over.",
        parse=_at_most(K8S_MAX_NAMESPACES),
    )
    object_size: tuple[int, int] = option(
        "--etcd-k8s-object-size",
        "2048:8192",
        "Bytes of each object written: MIN:MAX drawn uniformly, or one size such as 4096.",
        parse=_object_size,
    )
    page_size: int = option(
        "--etcd-k8s-page-size", 500, "Objects per page of a list (kube-apiserver's limit=500).", parse=positive
    )
    read_mix: tuple[tuple[str, float], ...] = option(
        "--etcd-k8s-read-mix",
        "get:5,get-stale:2,get-at-rev:8,list-stale:5,list-and-watch:80",
        "Read weights of EtcdKubernetesUser as NAME:WEIGHT,… with names get, get-stale, get-at-rev, list-stale, "
        "list-and-watch, count (default: etcd's robustness Kubernetes traffic).",
        parse=_read_mix,
    )
    write_mix: tuple[tuple[str, float], ...] = option(
        "--etcd-k8s-write-mix",
        "update:90,delete:5,create:5",
        "Write weights of EtcdKubernetesUser as NAME:WEIGHT,… with names update, delete, create.",
        parse=_write_mix,
    )
    rw_ratio: float = option(
        "--etcd-k8s-rw-ratio", 1.0, "Reads per write of EtcdKubernetesUser (0: writes only).", parse=zero_or_more
    )
    nodes: int = option(
        "--etcd-k8s-nodes",
        100,
        "Nodes whose lease EtcdKubernetesNodeUser renews (in namespace kube-node-lease).",
        parse=_at_most(K8S_MAX_NODES),
    )
    lease_period: float = option(
        "--etcd-k8s-lease-period",
        10.0,
        "Seconds between two renewals of a node's lease (the kubelet's 10 s).",
        parse=positive,
    )
    compact_interval: float = option(
        "--etcd-k8s-compact-interval",
        300.0,
        "Seconds between compactions by the master during a Kubernetes run, as kube-apiserver compacts every 5 min "
        "(0: off). Compaction is cluster-wide: it runs on the local etcd, or on the endpoints given only with "
        "--etcd-k8s-compact-allowed.",
        parse=zero_or_more,
    )
    compact_allowed: bool = option(
        "--etcd-k8s-compact-allowed",
        False,
        "Let --etcd-k8s-compact-interval compact the cluster of --etcd-endpoints (its whole history, every key).",
        parse=switch,
    )
    prefill_seconds: float = option(
        "--etcd-k8s-prefill-seconds",
        600.0,
        "At most this long writing the missing objects before a Kubernetes run (not measured); the run then "
        "goes on with what exists.",
        parse=positive,
    )

    @classmethod
    def build(cls, values, namespace, prefix: bytes | None = None, max_request_bytes: int | None = None, **context):
        """With the run's prefix and request limit: the largest object and its key fit in one etcd request."""
        if prefix is not None and max_request_bytes is not None:
            _check_object_size(values["objects"], values["object_size"][1], prefix, max_request_bytes)
        return cls(**values)


def _check_object_size(objects, largest: int, prefix: bytes, max_request_bytes: int) -> None:
    # the longest key: PREFIX RESOURCE/ns-NNNN/RESOURCE-NNNNNN (etcd_users.features.kubernetes.layout)
    longest_key = len(prefix) + max(2 * len(resource) + len(str(count)) + 16 for resource, count in objects)
    if largest + longest_key + REQUEST_OVERHEAD_BYTES > max_request_bytes:
        raise SettingsError(
            f"--etcd-k8s-object-size: objects of {largest} bytes are larger than etcd's --max-request-bytes "
            f"(--etcd-max-request-bytes {max_request_bytes} here); use at most "
            f"{max_request_bytes - longest_key - REQUEST_OVERHEAD_BYTES} {RAISE_LIMIT}"
        )
