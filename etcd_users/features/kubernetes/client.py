"""kube-apiserver's calls to etcd (etcd's client/v3/kubernetes), each reported as one Locust request ``k8s/…``.

- get: a Range of one key, limit 1, at the latest revision (``k8s/get``), at a revision seen (``k8s/get-at-rev``)
  or serializable, from the member's local state (``k8s/get-stale``);
- list: Ranges of a resource's prefix in pages of ``--etcd-k8s-page-size``, each page from the last key + ``\\0``
  at the first page's revision, one row per page: linearizable (``k8s/list``) or at a revision seen
  (``k8s/list-stale``); count: one count-only Range of the prefix (``k8s/count``);
- create, update, delete: a Txn comparing the key's mod_revision (0 for a create, the revision last seen for an
  update or delete), reading the key back when the compare fails; a failed compare is the Locust failure
  ``k8s: conflict`` of its request name (not an etcd error), and the object's current revision is kept;
- watch: one Watch stream per process, with a watcher on each resource's prefix from the revision of its first
  list (kube-apiserver's watch cache); one ``k8s/watch`` row per event of this process's writes, timed from the
  write's acknowledgement to the event's arrival, both on the transport's loop thread. A broken stream resumes on
  another member from each watcher's last revision, as kube-apiserver's reflector does; a resource is listed again
  (``k8s/list``) only when etcd says its watcher's revision was compacted, and the relists are counted.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import asyncio
import heapq
import logging
import time
import weakref
from collections import deque
from collections.abc import Callable

import gevent
import gevent.lock
import grpc
from etcd3.etcdrpc import kv_pb2, rpc_pb2

from etcd_users import session as sessions
from etcd_users.features.kubernetes.layout import (
    Layout,
    ObjectPool,
    Resource,
    ValueSource,
    WeightedChoice,
    choose_write,
    resources_by_count,
    spread_schedule,
)
from etcd_users.run_state.watch_latencies import WatchLatencies
from etcd_users.transport.errors import error_label
from etcd_users.transport.pool import Connection, EndpointPool
from etcd_users.transport.streams import ResumingStreams
from etcd_users.transport.watch_counts import WatchCounts
from etcd_users.user_base.client import REQUEST_TYPE, EtcdClient

logger = logging.getLogger("etcd_users.kubernetes.client")  # the name users' log filters know

CONFLICT_LABEL = "k8s: conflict"
COMPACTED_LABEL = "mvcc: required revision has been compacted"
_HEARTBEAT_TICK = 0.005  # seconds between looks while every node's renewal is in flight
_RETRY_PAUSE = 0.05  # seconds before a process that could not learn what exists tries again
_LISTING_PAGE = 10000  # keys per page when a process learns what exists (keys only, not reported)
_MOD = rpc_pb2.Compare.CompareTarget.Value("MOD")
_EQUAL = rpc_pb2.Compare.CompareResult.Value("EQUAL")
_DELETE = kv_pb2.Event.DELETE


async def list_keys(pool: EndpointPool, start: bytes, end: bytes) -> list[tuple[bytes, int]]:
    """Every (key, mod_revision) in [start, end), keys only, in pages at one revision."""
    found: list[tuple[bytes, int]] = []
    revision = 0
    settings = pool.settings
    while True:
        connection = pool.next_connection()
        response = await connection.kv.Range(
            rpc_pb2.RangeRequest(key=start, range_end=end, limit=_LISTING_PAGE, keys_only=True, revision=revision),
            timeout=settings.timeout,
            metadata=connection.metadata,
        )
        found.extend((kv.key, kv.mod_revision) for kv in response.kvs)
        revision = revision or response.header.revision
        if not response.more or not response.kvs:
            return found
        start = response.kvs[-1].key + b"\0"


class _Watcher:
    """One resource's watcher: its range, where it started, and the revision and key of its latest event."""

    __slots__ = ("range_end", "start", "latest", "last_key")

    def __init__(self, range_end: bytes, start: int) -> None:
        self.range_end = range_end
        self.start = start
        self.latest = 0
        self.last_key = b""

    @property
    def resume_from(self) -> int:
        """Where a stream opened again creates it: after its latest event, or where it was asked to start."""
        return self.latest + 1 if self.latest else self.start


class ResourceWatch(ResumingStreams):
    """The process's Watch stream, one watcher per resource prefix; lives on the loop thread.

    ``watched`` (read by the gevent thread) holds the prefixes with a watcher created or being created. A stream that
    breaks (its member killed, cut off, or gone) is opened again on another member, each watcher from the revision after
    its latest event, as kube-apiserver's reflector resumes a watch from its last resource version: no list, nothing
    missed. Only a watcher etcd cancels because its revision was compacted (kube-apiserver's "too old resource
    version") leaves ``watched``, and its prefix goes to ``relists``: the gevent side lists the resource again and
    watches it from there (counted as a relist).

    Each watcher's events are checked as the audit's prefix watchers' are (``watchers.streams``): never below its
    previous revision, never its previous event again, a revision never split over two responses, across a resumed
    stream too; the counts (with the streams resumed and the relists) are added to ``counts`` once, when the watch is
    cancelled.
    """

    def __init__(
        self,
        connection: Connection,
        latencies: WatchLatencies,
        counts: WatchCounts | None = None,
        reopen: Callable[[Connection], Connection] | None = None,
    ) -> None:
        super().__init__(connection, 1, reopen)
        self.watched: set[bytes] = set()
        self.relists: deque[bytes] = (
            deque()
        )  # prefixes to list and watch again, appended here, taken by the gevent side
        self._latencies = latencies
        self._counts = counts
        self._watchers: dict[bytes, _Watcher] = {}
        self._judged = WatchCounts()  # ordered, unique, atomic, as each response is judged
        self._created: set[bytes] = set()  # every prefix the watch ever had a watcher on
        self._relisted = 0
        self._creating: deque[bytes] = deque()  # the prefixes of the creations sent on the stream, in their order
        self._ids: dict[int, bytes] = {}  # the stream's watch ids
        self._writing = asyncio.Lock()  # a stream takes one write at a time
        self._reader = asyncio.get_running_loop().create_task(self._read(0))

    @property
    def broken(self) -> bool:
        """Cancelled: the process opens another on its next watch."""
        return self._cancelled

    async def add(self, prefix: bytes, range_end: bytes, start_revision: int) -> None:
        """Create a watcher (the gevent side has put ``prefix`` in ``watched`` already)."""
        async with self._writing:
            if self._cancelled or prefix in self._watchers:
                return
            self._watchers[prefix] = _Watcher(range_end, start_revision)
            self._creating.append(prefix)
            try:
                await self._write_create(self._calls[0], prefix)
            except (grpc.aio.AioRpcError, asyncio.InvalidStateError):
                pass  # the stream broke: the stream opened again creates it

    async def _create(self, call, stream: int) -> None:
        """Every watcher again on a stream opened again, each from the revision after its latest event."""
        async with self._writing:
            self._creating.clear()
            self._ids.clear()
            for prefix in list(self._watchers):
                self._creating.append(prefix)
                await self._write_create(call, prefix)

    async def _write_create(self, call, prefix: bytes) -> None:
        watcher = self._watchers[prefix]
        create = rpc_pb2.WatchCreateRequest(key=prefix, range_end=watcher.range_end, start_revision=watcher.resume_from)
        await call.write(rpc_pb2.WatchRequest(create_request=create))

    async def _read_events(self, call, stream: int) -> None:
        arrivals, errors = self._latencies.arrivals, self._latencies.errors
        async for response in call:
            now = time.perf_counter()
            if response.created and self._creating:
                prefix = self._ids[response.watch_id] = self._creating.popleft()
                self._created.add(prefix)
            if response.canceled:
                self._cancelled_by_etcd(response, errors)
            if not response.events:
                continue
            watcher = self._watchers.get(self._ids.get(response.watch_id, b""))
            if watcher is not None:
                watcher.latest = self._judged.judge(response.events, watcher.latest, watcher.last_key)
                watcher.last_key = response.events[-1].kv.key
            for event in response.events:
                kv = event.kv
                arrivals.append((kv.mod_revision, now, kv.key, event.type == _DELETE))

    def _cancelled_by_etcd(self, response, errors: deque[str]) -> None:
        """A watcher etcd ended: its prefix is watched no more; after a compaction of its revision, listed again."""
        prefix = self._ids.pop(response.watch_id, None)
        if prefix is None:
            return
        self._watchers.pop(prefix, None)
        self.watched.discard(prefix)
        errors.append(response.cancel_reason or (COMPACTED_LABEL if response.compact_revision else ""))
        if response.compact_revision:
            self._relisted += 1
            self.relists.append(prefix)

    def _add_counts(self) -> None:
        counts, self._counts = self._counts, None
        if counts is not None and self._created:
            counts.add(
                WatchCounts(
                    watchers=len(self._created),
                    in_order=self._judged.in_order,
                    disordered=self._judged.disordered,
                    repeated=self._judged.repeated,
                    split=self._judged.split,
                    resumed=sum(self._reopened),
                    relisted=self._relisted,
                )
            )

    def cancel(self) -> None:
        self._cancelled = True
        self._calls[0].cancel()
        self._reader.cancel()
        self._add_counts()  # now: the audit reads them once the users stopped


class KubernetesState:
    """What the Kubernetes users of one process share: the layout, the objects known, the watch, the latencies."""

    def __init__(self, session: sessions.Session, counts: WatchCounts | None = None) -> None:
        self.session = session
        self.counts = counts  # the audit's watch counts of the process: each stream adds its own
        settings = session.settings
        self.k8s = settings.k8s
        self.layout = Layout(settings.prefix, settings.k8s)
        self.values = ValueSource(*settings.k8s.object_size)
        self.read_mix = WeightedChoice(settings.k8s.read_mix)
        self.write_mix = WeightedChoice(settings.k8s.write_mix)
        self.by_count = resources_by_count(self.layout.resources)
        self.uniform = WeightedChoice((resource, 1.0) for resource in self.layout.resources)
        self.latencies = WatchLatencies(horizon=2 * settings.timeout)
        self.revision = 0  # the newest revision a response of this process carried: get-at-rev and list-stale read it
        self.pools: dict[str, ObjectPool] | None = None
        self.node_revisions: dict[bytes, int] | None = None
        self.heartbeats: list[tuple[float, int]] | None = None  # a heap of (due, node)
        self.watch: ResourceWatch | None = None
        self._lock = gevent.lock.Semaphore()
        self._resource_start = len(settings.prefix)  # where the resource's name starts in a key

    def resource_at(self, prefix: bytes) -> Resource:
        """The resource whose objects live under ``prefix``."""
        return next(resource for resource in self.layout.resources if resource.prefix == prefix)

    def ensure_objects(self) -> dict[str, ObjectPool]:
        """The objects that exist, learnt once per process with a keys-only list of each resource (not reported)."""
        if self.pools is None:
            with self._lock:
                if self.pools is None:
                    pools = {}
                    for resource in self.layout.resources:
                        listed = self.session.bridge.run(
                            list_keys, self.session.pool, resource.prefix, resource.range_end
                        )
                        pools[resource.name] = ObjectPool.from_listing(resource, listed)
                    self.pools = pools
        return self.pools

    def observe(self, key: bytes, revision: int, deleted: bool) -> None:
        """A watch event keeps the process's objects current, as kube-apiserver's watch cache: fewer conflicts."""
        pools = self.pools
        if pools is not None:
            start = self._resource_start
            pool = pools.get(key[start : key.find(b"/", start)].decode(errors="replace"))
            if pool is not None:
                pool.observed(key, revision, deleted)

    def ensure_nodes(self) -> dict[bytes, int]:
        """The nodes' leases that exist, and when each comes due first."""
        if self.node_revisions is None:
            with self._lock:
                if self.node_revisions is None:
                    layout = self.layout
                    listed = self.session.bridge.run(
                        list_keys, self.session.pool, layout.node_prefix, layout.node_range_end
                    )
                    self.heartbeats = spread_schedule(layout.nodes, self.k8s.lease_period, time.perf_counter())
                    self.node_revisions = dict(listed)
        return self.node_revisions

    def watch_from(self, prefix: bytes, range_end: bytes, revision: int) -> None:
        """A watcher on ``prefix`` from ``revision`` unless one is there (the stream opened on first use)."""
        watch = self.watch
        if watch is not None and not watch.broken and prefix in watch.watched:
            return
        bridge = self.session.bridge
        with self._lock:  # opening the stream yields to other users, which must not open one too
            watch = self.watch
            if watch is None or watch.broken:
                pool = self.session.pool
                connection = pool.next_connection()
                self.watch = watch = bridge.run(
                    _open_watch, connection, self.latencies, self.counts, pool.another_connection
                )
            if prefix in watch.watched:
                return
            watch.watched.add(prefix)  # at once: the process's other users do not ask for it again
        bridge.post(_add_watcher, watch, prefix, range_end, revision)

    def close(self) -> None:
        if self.watch is not None:
            self.session.bridge.post(self.watch.cancel)
            self.watch = None


async def _open_watch(
    connection: Connection,
    latencies: WatchLatencies,
    counts: WatchCounts | None,
    reopen: Callable[[Connection], Connection],
) -> ResourceWatch:
    return ResourceWatch(connection, latencies, counts, reopen)


def _add_watcher(watch: ResourceWatch, prefix: bytes, range_end: bytes, revision: int) -> None:
    asyncio.get_running_loop().create_task(watch.add(prefix, range_end, revision))


_states: "weakref.WeakKeyDictionary[sessions.Session, KubernetesState]" = weakref.WeakKeyDictionary()
_states_lock = gevent.lock.Semaphore()


def state_of(session: sessions.Session, counts: WatchCounts | None = None) -> KubernetesState:
    state = _states.get(session)
    if state is None:
        with _states_lock:
            state = _states.get(session)
            if state is None:
                state = _states[session] = KubernetesState(session, counts)
    return state


def close_states() -> None:
    """Stop every process's watch (at the end of a run)."""
    for state in list(_states.values()):
        state.close()


class KubernetesClient(EtcdClient):
    """``self.etcd`` of the Kubernetes users: kube-apiserver's calls on top of the instrumented client."""

    def __init__(self, environment) -> None:
        super().__init__(environment)
        self._state: KubernetesState | None = None
        self._compares = False  # the call in flight is a Txn whose failed compare is a conflict
        self._acknowledged = 0.0  # time.perf_counter() at the status of the last call, on the loop thread
        self._watch_fire = self.watch_reporter("k8s/watch")
        self._reads = {
            "get": self.get,
            "get-stale": self.get_stale,
            "get-at-rev": self.get_at_revision,
            "list-stale": self.list_stale,
            "list-and-watch": self.list_and_watch,
            "count": self.count,
        }
        self._writes = {"update": self.update, "delete": self.delete_object, "create": self.create}

    @property
    def k8s(self) -> KubernetesState:
        if self._state is None:
            self._state = state_of(self.session, self._record.watches if self._record is not None else None)
        return self._state

    # -- the workload --

    def operation(self) -> None:
        """One read or write of the mixes, at ``--etcd-k8s-rw-ratio`` reads per write; then the watch events."""
        state = self.k8s
        pools = state.pools or self._prepared(state.ensure_objects)
        if pools is None:
            return
        watch = state.watch
        if watch is not None and watch.relists:
            self.relist(watch.relists.popleft())
        ratio = state.k8s.rw_ratio
        if self._random() * (1.0 + ratio) < ratio:
            self._reads[state.read_mix()]()
        else:
            pool = pools[state.by_count().name]
            self._writes[choose_write(pool, state.write_mix)](pool)
        if state.latencies.arrivals or state.latencies.errors:
            self.deliver_watch_events()

    def _prepared(self, ensure):
        """``ensure()``'s result; None when etcd refused its list, counted under ``k8s/list`` (tried again next)."""
        try:
            return ensure()
        except grpc.aio.AioRpcError as error:
            self._fire(
                request_type=REQUEST_TYPE,
                name="k8s/list",
                response_time=0.0,
                response_length=0,
                exception=error_label(error),
            )
            gevent.sleep(_RETRY_PAUSE)
            return None

    def deliver_watch_events(self) -> None:
        latencies = self.k8s.latencies
        while latencies.errors:
            label = latencies.errors.popleft()
            if label:
                self._fire(
                    request_type=REQUEST_TYPE, name="k8s/watch", response_time=0.0, response_length=0, exception=label
                )
        latencies.deliver(self._watch_fire, time.perf_counter(), self.k8s.observe)

    # -- reads --

    def _object(self) -> bytes:
        state = self.k8s
        picked = state.pools[state.by_count().name].pick() if state.pools else None
        return picked[0] if picked is not None else state.layout.resources[0].key(0)

    def get(self, key: bytes | None = None, *, revision: int = 0, serializable: bool = False, name: str = "k8s/get"):
        request = rpc_pb2.RangeRequest(key=key or self._object(), limit=1, revision=revision, serializable=serializable)
        return self._call("Range", request, name)

    def get_stale(self):
        return self.get(serializable=True, name="k8s/get-stale")

    def get_at_revision(self):
        return self.get(revision=self.k8s.revision, name="k8s/get-at-rev")

    def list(self, resource, revision: int = 0, *, name: str = "k8s/list") -> int | None:
        """Every object of ``resource`` in pages, each page a request; the revision listed, None on a failure."""
        page_size = self.k8s.k8s.page_size
        start, end = resource.prefix, resource.range_end
        while True:
            request = rpc_pb2.RangeRequest(key=start, range_end=end, limit=page_size, revision=revision)
            response = self._call("Range", request, name)
            if response is None:
                return None
            revision = revision or response.header.revision
            if not response.more or not response.kvs:
                return revision
            start = response.kvs[-1].key + b"\0"

    def list_stale(self):
        state = self.k8s
        return self.list(state.uniform(), state.revision, name="k8s/list-stale")

    def list_and_watch(self) -> None:
        """A linearizable list, and a watcher on the resource from its revision unless the process has one."""
        state = self.k8s
        resource = state.uniform()
        revision = self.list(resource)
        if revision is None:
            return
        state.revision = max(state.revision, revision)
        state.watch_from(resource.prefix, resource.range_end, revision + 1)

    def relist(self, prefix: bytes) -> None:
        """etcd compacted the revision of the resource's watcher: listed again and watched from the list's revision, as
        kube-apiserver's reflector relists after "too old resource version" (tried again next when the list fails)."""
        state = self.k8s
        resource = state.resource_at(prefix)
        revision = self.list(resource)
        if revision is None:
            if state.watch is not None:
                state.watch.relists.appendleft(prefix)
            return
        state.revision = max(state.revision, revision)
        state.watch_from(resource.prefix, resource.range_end, revision + 1)

    def count(self):
        resource = self.k8s.uniform()
        request = rpc_pb2.RangeRequest(key=resource.prefix, range_end=resource.range_end, count_only=True)
        return self._call("Range", request, "k8s/count")

    # -- writes --

    def create(self, pool: ObjectPool) -> None:
        self._optimistic(pool, pool.new_key(), 0, self.k8s.values(), "k8s/create")

    def update(self, pool: ObjectPool) -> None:
        picked = pool.pick()
        if picked is None:
            return self.create(pool)
        key, revision = picked
        self._optimistic(pool, key, revision, self.k8s.values(), "k8s/update")

    def delete_object(self, pool: ObjectPool) -> None:
        picked = pool.pick()
        if picked is None:
            return self.create(pool)
        key, revision = picked
        if self._optimistic(pool, key, revision, None, "k8s/delete"):
            pool.gone(key)

    def renew_node_lease(self, node: int) -> None:
        """A kubelet's heartbeat: an update of its node's Lease (``k8s/lease-renew``)."""
        state = self.k8s
        revisions = state.node_revisions
        key = state.layout.node_key(node)
        self._optimistic(revisions, key, revisions.get(key, 0), state.values.node_lease, "k8s/lease-renew")

    def heartbeats(self, running) -> None:
        """Renew the lease of each of ``--etcd-k8s-nodes`` nodes every ``--etcd-k8s-lease-period`` seconds, as the
        nodes' kubelets do: each renewal in a greenlet of its own when it comes due, a node's next one due a period
        after the last was due (at once when that is past); late renewals are measured from when they were due too.
        A slow etcd makes renewals late, never fewer nodes."""
        state = self.k8s
        while self._prepared(state.ensure_nodes) is None:
            if not running():
                return
        due_times, period = state.heartbeats, state.k8s.lease_period
        idle: list[KubernetesClient] = []  # one client per renewal in flight: each keeps its own timing

        def renew(client: KubernetesClient, due: float, node: int) -> None:
            try:
                client.intended_start = due
                client.renew_node_lease(node)
            finally:
                heapq.heappush(due_times, (due + period, node))
                idle.append(client)

        while running():
            if not due_times:  # every node's renewal is in flight
                gevent.sleep(_HEARTBEAT_TICK)
                continue
            wait = due_times[0][0] - time.perf_counter()
            if wait > 0:
                # a renewal that ends pushes its node a period later: after the one waited for
                gevent.sleep(wait)
                continue
            due, node = heapq.heappop(due_times)
            client = idle.pop() if idle else KubernetesClient(self.environment)
            gevent.spawn(renew, client, due, node)
            if state.latencies.arrivals or state.latencies.errors:
                self.deliver_watch_events()

    def _optimistic(self, known, key: bytes, revision: int, value: bytes | None, name: str) -> bool:
        """kube-apiserver's optimistic write: put ``value`` (or delete, for None) if the key's mod_revision is
        ``revision``, else read it. Keeps the revision in ``known`` (a pool, or the nodes' revisions); True when done.
        """
        self._check_prefix(key)  # the one key the Txn writes (EtcdClient.txn would walk every operation)
        # built in place: a third of the CPU of nesting ready-made messages
        request = rpc_pb2.TxnRequest()
        request.compare.add(key=key, target=_MOD, result=_EQUAL, mod_revision=revision)
        if value is None:
            request.success.add().request_delete_range.key = key
        else:
            put = request.success.add().request_put
            put.key, put.value = key, value
        request.failure.add().request_range.key = key
        self._compares = True
        try:
            response = self._call("Txn", request, name)
        finally:
            self._compares = False
        if response is None:
            return False
        state = self.k8s
        if response.succeeded:
            written = response.header.revision
            state.revision = max(state.revision, written)
            if value is not None:
                _seen(known, key, written)
            state.latencies.acknowledged(written, self._acknowledged, self._watch_fire)
            return True
        kvs = response.responses[0].response_range.kvs
        if kvs:
            _seen(known, key, kvs[0].mod_revision)
        elif isinstance(known, ObjectPool):
            known.gone(key)
        else:
            known.pop(key, None)
        return False

    def _report(self, name: str, result, error, seconds: float, ended: float):
        self._acknowledged = ended
        if error is not None or not self._compares or result.succeeded:
            return super()._report(name, result, error, seconds, ended)
        # a failed compare: etcd answered, the object had changed; counted apart from etcd's errors
        started_at = time.time() - (time.perf_counter() - ended) - seconds
        self._fire_call(name, seconds, result.ByteSize(), CONFLICT_LABEL, self._take_context(ended), started_at)
        return result


def _seen(known, key: bytes, revision: int) -> None:
    if isinstance(known, ObjectPool):
        known.seen(key, revision)
    else:
        known[key] = revision
