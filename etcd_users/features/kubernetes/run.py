"""What a Kubernetes run does besides its requests, on the master (or the single process): the objects written before
the users start (``prefill``, not measured), and kube-apiserver's periodic compaction during the run.

``KubernetesRun`` is the feature's hooks (``etcd_users.core.features``), called after the tool's own listeners, which
resolve the run's settings and start the local etcd first. A headless run prefills at init, before Locust starts the
clock of ``-t``; a run started from the web UI, whose classes come with the start, at test start, before its users
spawn. A run whose classes are not Kubernetes ones does nothing.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import asyncio
import logging
import time
from dataclasses import dataclass, field, replace

import gevent
import grpc
from etcd3.etcdrpc import rpc_pb2

from etcd_users.core.feature_hooks import FeatureHooks
from etcd_users.core.run_context import run_context
from etcd_users.features.kubernetes.client import close_states, list_keys
from etcd_users.features.kubernetes.layout import NODE_LEASE_BYTES, Layout, ValueSource
from etcd_users.settings import EtcdSettings
from etcd_users.target.cluster import TargetCluster
from etcd_users.transport import compaction
from etcd_users.transport.errors import EndpointError, error_label
from etcd_users.transport.pool import EndpointPool
from etcd_users.transport.probe import with_probe
from etcd_users.user_base.client import KeyOutsidePrefixError
from etcd_users.workload_model.preparation import KUBERNETES, Preparation

logger = logging.getLogger("etcd_users.kubernetes.run")  # the name users' log filters know

PREFILL_CONCURRENCY = 64
PROGRESS_SECONDS = 5.0
# what a User class writes before the run: "objects" (--etcd-k8s-objects), "nodes" (the nodes' leases)
PREFILL_ATTRIBUTE = "k8s_prefill"


@dataclass
class Prefill:
    """Progress of a prefill, written by the loop thread, read by the gevent thread's progress lines."""

    missing: int = 0
    existing: int = 0
    created: int = 0
    failed: dict[str, int] = field(default_factory=dict)
    timed_out: bool = False
    started: float = 0.0  # time.monotonic()

    def preparation(self, inside_run: bool) -> Preparation:
        """The run summary's ``preparation.kubernetes``; an error when objects are missing (failed or timed out)."""
        why = ", ".join(f"{label} ×{count}" for label, count in sorted(self.failed.items()))
        if self.timed_out:
            why = "; ".join(filter(None, (why, "stopped after --etcd-k8s-prefill-seconds")))
        return Preparation(
            KUBERNETES,
            self.existing + self.missing,
            self.created,
            time.monotonic() - self.started,
            why if self.created < self.missing else "",
            inside_run,
        )


def wanted_keys(layout: Layout, parts: set[str]) -> list[tuple[bytes, bytes, list[bytes], int]]:
    """(prefix, range end, keys the run starts with, value size or 0 for the object size) of each part."""
    wanted = []
    if "objects" in parts:
        wanted += [(r.prefix, r.range_end, list(r.keys()), 0) for r in layout.resources]
    if "nodes" in parts:
        wanted.append((layout.node_prefix, layout.node_range_end, list(layout.node_keys()), NODE_LEASE_BYTES))
    return wanted


async def _prefill(pool: EndpointPool, wanted, deadline: float, progress: Prefill) -> None:
    settings = pool.settings
    values = ValueSource(*settings.k8s.object_size)
    missing: list[tuple[bytes, bytes]] = []
    for prefix, range_end, keys, size in wanted:
        existing = {key for key, _ in await list_keys(pool, prefix, range_end)}
        progress.existing += sum(key in existing for key in keys)
        missing += [(key, values.node_lease if size else b"") for key in keys if key not in existing]
    progress.missing = len(missing)
    todo = iter(missing)
    loop = asyncio.get_running_loop()

    async def worker() -> None:
        for key, value in todo:
            if loop.time() > deadline:
                progress.timed_out = True
                return
            connection = pool.next_connection()
            # a create as kube-apiserver makes it: only if the key does not exist (another process may race)
            request = rpc_pb2.TxnRequest(
                compare=[rpc_pb2.Compare(key=key, target=rpc_pb2.Compare.MOD, result=rpc_pb2.Compare.EQUAL)],
                success=[rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=key, value=value or values()))],
            )
            try:
                await connection.kv.Txn(request, timeout=settings.timeout, metadata=connection.metadata)
            except grpc.aio.AioRpcError as error:
                label = error_label(error)
                progress.failed[label] = progress.failed.get(label, 0) + 1
            else:
                progress.created += 1

    await asyncio.gather(*(worker() for _ in range(PREFILL_CONCURRENCY)))


def prefill(settings: EtcdSettings, parts: set[str]) -> Prefill:
    """Write the objects (and nodes' leases) of ``parts`` that do not exist yet, for at most
    ``--etcd-k8s-prefill-seconds``, logging progress; the run goes on with what exists."""
    layout = Layout(settings.prefix, settings.k8s)
    wanted = wanted_keys(layout, parts)
    for prefix, _, keys, _ in wanted:  # the layout's keys are the prefix's by construction; a write proves it
        if not prefix.startswith(settings.prefix) or not all(key.startswith(prefix) for key in keys):
            raise KeyOutsidePrefixError(f"{prefix!r} is outside --etcd-prefix {settings.prefix!r}")
    progress = Prefill()
    started = progress.started = time.monotonic()
    budget = settings.k8s.prefill_seconds

    def report() -> None:
        while True:
            gevent.sleep(PROGRESS_SECONDS)
            rate = progress.created / max(1e-9, time.monotonic() - started)
            logger.info(
                "kubernetes prefill: %d of %d missing objects written (%.0f/s)",
                progress.created,
                progress.missing,
                rate,
            )

    reporter = gevent.spawn(report)
    try:
        with_probe(
            replace(settings, conns=1),
            lambda pool: _prefill(pool, wanted, asyncio.get_running_loop().time() + budget, progress),
        )
    finally:
        reporter.kill(block=False)
    where = settings.prefix.decode(errors="replace")
    logger.info(
        "kubernetes prefill: %d objects existed under %r, %d written in %.1fs",
        progress.existing,
        where,
        progress.created,
        time.monotonic() - started,
    )
    if progress.failed:
        failures = ", ".join(f"{label} ×{count}" for label, count in sorted(progress.failed.items()))
        logger.warning("kubernetes prefill: %s; the run goes on with the objects that exist", failures)
    if progress.timed_out:
        logger.warning(
            "kubernetes prefill: stopped after --etcd-k8s-prefill-seconds %g with %d of %d missing objects written; "
            "the run goes on with what exists (run again with --etcd-allow-existing to write the rest)",
            budget,
            progress.created,
            progress.missing,
        )
    return progress


def may_compact(settings: EtcdSettings, local: bool) -> bool:
    """kube-apiserver's compaction runs on the local etcd, or on the endpoints given with --etcd-k8s-compact-allowed:
    compaction drops the history of the whole cluster, not only of the prefix."""
    return settings.k8s.compact_interval > 0 and (local or settings.k8s.compact_allowed)


class KubernetesRun(FeatureHooks):
    """The feature's hooks: prefill and compaction on the master or the single process."""

    def __init__(self, tool) -> None:
        super().__init__(tool)
        self.compactor: compaction.Compactor | None = None
        self.prefilled: tuple[EtcdSettings, set[str]] | None = None  # what the init wrote, for the first run

    def _prefill(self, environment, inside_run: bool) -> EtcdSettings | None:
        """The objects of the run's Kubernetes classes, once per settings and classes; the settings, or None."""
        parts = {part for cls in environment.user_classes or () for part in getattr(cls, PREFILL_ATTRIBUTE, ())}
        if not parts or run_context(environment).role.is_worker:
            self.preparation = None
            return None
        settings = self.tool.run_settings
        if settings is None:
            return None  # the options were refused: the run is being stopped
        if self.prefilled != (settings, parts):
            try:
                self.preparation = prefill(settings, parts).preparation(inside_run)
            except EndpointError as error:
                logger.error("locust-etcd: error: kubernetes prefill: %s", error)
                self.preparation = Preparation(KUBERNETES, 0, error=str(error), inside_run=inside_run)
            self.prefilled = (settings, parts)
        return settings

    def on_init(self, environment, **_kwargs) -> None:
        """A headless run knows its classes now, before Locust starts the clock of -t: prefill here."""
        options = environment.parsed_options
        if getattr(options, "headless", False) or getattr(options, "autostart", False):
            self._prefill(environment, inside_run=False)

    def on_test_start(self, environment, **_kwargs) -> None:
        # the web UI's runs: classes and options come with the start
        settings = self._prefill(environment, inside_run=True)
        if settings is None:
            return
        self.prefilled = None  # a next run from the web UI looks again: this run changes what exists
        self._stop_compacting()
        local = self.tool.get(TargetCluster).local is not None
        if may_compact(settings, local):
            interval = settings.k8s.compact_interval
            self.compactor = compaction.Compactor(
                settings.with_slice(replace(settings.monitoring, compact_interval=interval))
            )
            self.compactor.start()
            logger.info(
                "kubernetes compaction: every %gs at the revision of %gs ago, as kube-apiserver does "
                "(--etcd-k8s-compact-interval)",
                interval,
                interval,
            )
        elif settings.k8s.compact_interval > 0:
            logger.info(
                "kubernetes compaction: off on --etcd-endpoints (it compacts the whole cluster); pass "
                "--etcd-k8s-compact-allowed to compact every %gs as kube-apiserver does",
                settings.k8s.compact_interval,
            )

    def on_test_stop(self, **_kwargs) -> None:
        self._stop_compacting()
        close_states()

    def on_quit(self, **_kwargs) -> None:
        self._stop_compacting()  # the streams went with the connections (etcd_users.core.plugin closes them first)

    def _stop_compacting(self) -> None:
        if self.compactor is not None:
            self.compactor.stop()
            self.compactor = None
