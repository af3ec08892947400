"""How kube-apiserver lays objects out in etcd, and the choices of the Kubernetes workload: pure, no gRPC, no Locust.

Keys are ``PREFIX RESOURCE/NAMESPACE/NAME`` (kube-apiserver's ``/registry/pods/default/web-0`` with
``--etcd-prefix /registry/``): object ``i`` of the objects a run starts with lives in namespace
``ns-{i mod namespaces}`` as ``RESOURCE-{i}``, an object created during a run as ``RESOURCE-{5 random characters}``;
node ``n``'s lease is ``PREFIX leases/kube-node-lease/node-{n}``.
"""

from __future__ import annotations

import bisect
import itertools
import os
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Generic, TypeVar

from etcd_users.features.kubernetes.options import KubeSettings
from etcd_users.workload_model.keys import prefix_range_end

NODE_LEASE_NAMESPACE = "kube-node-lease"
# a node's Lease object as kube-apiserver stores it (protobuf): about 300 bytes
NODE_LEASE_BYTES = 300

T = TypeVar("T")
_NAME_CHARACTERS = b"bcdfghjklmnpqrstvwxz2456789"  # kube-apiserver's generateName alphabet
_NAME_SUFFIX = 5


class Resource:
    """One resource's objects: ``count`` of them, spread over ``namespaces`` namespaces."""

    def __init__(self, prefix: bytes, name: str, count: int, namespaces: int) -> None:
        self.name = name
        self.count = count
        self.namespaces = namespaces
        self.prefix = prefix + name.encode() + b"/"
        self.range_end = prefix_range_end(self.prefix)
        self._name = name.encode()

    def key(self, index: int) -> bytes:
        return b"%sns-%04d/%s-%06d" % (self.prefix, index % self.namespaces, self._name, index)

    def named(self, namespace: int, suffix: bytes) -> bytes:
        """The key of a created object: ``RESOURCE-suffix`` in namespace ``namespace``."""
        return b"%sns-%04d/%s-%s" % (self.prefix, namespace, self._name, suffix)

    def keys(self) -> Iterator[bytes]:
        """The keys of the objects the run starts with (written before it when missing)."""
        return (self.key(index) for index in range(self.count))

    def owns(self, key: bytes) -> bool:
        """A key of this workload's namespaces (a node's lease, or another application's object, is not)."""
        return key.startswith(self.prefix + b"ns-")


class Layout:
    """Every resource of ``--etcd-k8s-objects`` and the nodes' leases, under ``prefix``."""

    def __init__(self, prefix: bytes, k8s: KubeSettings) -> None:
        self.resources = [Resource(prefix, name, count, k8s.namespaces) for name, count in k8s.objects]
        self.nodes = k8s.nodes
        self.node_prefix = b"%sleases/%s/" % (prefix, NODE_LEASE_NAMESPACE.encode())
        self.node_range_end = prefix_range_end(self.node_prefix)

    def node_key(self, node: int) -> bytes:
        return b"%snode-%06d" % (self.node_prefix, node)

    def node_keys(self) -> Iterator[bytes]:
        return (self.node_key(node) for node in range(self.nodes))


class WeightedChoice(Generic[T]):
    """Draws one of the choices with the probability of its weight (``--etcd-k8s-read-mix``, …)."""

    def __init__(self, weights: Iterable[tuple[T, float]], draw: Callable[[], float] | None = None) -> None:
        weights = [(choice, weight) for choice, weight in weights if weight > 0]
        if not weights:
            raise ValueError("no choice has a positive weight")
        self.choices = [choice for choice, _ in weights]
        self._cumulative = list(itertools.accumulate(weight for _, weight in weights))
        self._total = self._cumulative[-1]
        self._draw = draw or random.Random().random

    def __call__(self) -> T:
        index = bisect.bisect(self._cumulative, self._draw() * self._total)
        return self.choices[min(index, len(self.choices) - 1)]


class ObjectPool:
    """The objects of one resource that a process knows, with the revision it last saw of each.

    Updates and deletes compare that revision (kube-apiserver's optimistic concurrency); a conflict brings the current
    one; a watch event brings another writer's changes. Creates name new objects (``new_key``).
    """

    def __init__(self, resource: Resource, draw: Callable[[], float] | None = None) -> None:
        self.resource = resource
        self._keys: list[bytes] = []
        self._position: dict[bytes, int] = {}
        self._revision: dict[bytes, int] = {}
        self._draw = draw or random.Random().random

    @classmethod
    def from_listing(cls, resource: Resource, listed: Iterable[tuple[bytes, int]], draw=None) -> ObjectPool:
        """The pool of what a list of the resource found (key, mod_revision)."""
        pool = cls(resource, draw)
        for key, revision in listed:
            if resource.owns(key):
                pool.seen(key, revision)
        return pool

    def __len__(self) -> int:
        return len(self._keys)

    def revision(self, key: bytes) -> int:
        """The revision last seen of ``key``; 0 for an object not known to exist."""
        return self._revision.get(key, 0)

    def pick(self) -> tuple[bytes, int] | None:
        """A random existing object and its revision; None when there is none."""
        if not self._keys:
            return None
        key = self._keys[int(self._draw() * len(self._keys))]
        return key, self._revision[key]

    def seen(self, key: bytes, revision: int) -> None:
        """``key`` exists at ``revision``."""
        if key not in self._position:
            self._position[key] = len(self._keys)
            self._keys.append(key)
        self._revision[key] = revision

    def observed(self, key: bytes, revision: int, deleted: bool) -> None:
        """A watch event: ``key`` was written (or deleted) at ``revision``, by this process or another; what is known
        from a later revision stays (an event may come after the acknowledgement of a later write)."""
        if not self.resource.owns(key) or revision <= self._revision.get(key, 0):
            return
        if deleted:
            self.gone(key)
        else:
            self.seen(key, revision)

    def gone(self, key: bytes) -> None:
        """``key`` was deleted."""
        position = self._position.pop(key, None)
        if position is None:
            return
        last = self._keys.pop()
        if last != key:
            self._keys[position] = last
            self._position[last] = position
        del self._revision[key]

    def new_key(self) -> bytes:
        """A name for a create: ``RESOURCE-xxxxx`` with a random suffix in a random namespace, as kube-apiserver's
        generateName makes them (and etcd's robustness traffic); other processes' creates do not take it first."""
        draw, resource = self._draw, self.resource
        suffix = bytes(_NAME_CHARACTERS[int(draw() * len(_NAME_CHARACTERS))] for _ in range(_NAME_SUFFIX))
        return resource.named(int(draw() * resource.namespaces), suffix)


def choose_write(pool: ObjectPool, mix: Callable[[], str]) -> str:
    """The write to do next, from the mix; but as etcd's robustness traffic does, a resource that fell under half its
    objects is created into, and one over 1.5 times deleted from, so the count stays near ``--etcd-k8s-objects``."""
    count, target = len(pool), pool.resource.count
    if count == 0 or 2 * count < target:
        return "create"
    if 2 * count > 3 * target:
        return "delete"
    return mix()


class ValueSource:
    """Object values of ``--etcd-k8s-object-size``: slices of one random buffer, a fresh one costs a memcpy."""

    def __init__(self, smallest: int, largest: int, draw: Callable[[], float] | None = None) -> None:
        self.smallest, self.largest = smallest, largest
        self._buffer = os.urandom(max(2 * largest + 1, NODE_LEASE_BYTES))
        self._draw = draw or random.Random().random
        self.node_lease = self._buffer[:NODE_LEASE_BYTES]  # a renewal changes the lease's renewTime alone

    def __call__(self) -> bytes:
        size = self.smallest + int(self._draw() * (self.largest - self.smallest + 1))
        start = int(self._draw() * (self.largest + 1))
        return self._buffer[start : start + size]


def spread_schedule(nodes: int, period: float, start: float) -> list[tuple[float, int]]:
    """When each node's lease is first due, evenly over one period (a heap: sorted)."""
    return [(start + period * node / nodes, node) for node in range(nodes)]


def pages(total: int, page_size: int) -> int:
    """Requests a list of ``total`` objects takes in pages of ``page_size`` (at least one)."""
    return max(1, -(-total // page_size))


def resources_by_count(resources: Sequence[Resource]) -> WeightedChoice[Resource]:
    """Gets and writes touch each object equally often: a resource is picked by its share of the objects."""
    return WeightedChoice((resource, float(resource.count)) for resource in resources)
