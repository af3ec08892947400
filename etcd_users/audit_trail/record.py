"""What the audit keeps of the current run in each process that runs users: the acknowledged writes (``Ledger``), the
watch streams' counts and the checks of the reads (``ReadChecks``). The users' client records into them after each
response (``etcd_users.user_base.client``); the audit (``etcd_users.features.audit.run``) puts a record on the
run's context (``etcd_users.core.run_context``) at each run's start and reads it at its end. Pure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from etcd_users.audit_trail.ledger import Ledger
from etcd_users.audit_trail.reads import ReadChecks
from etcd_users.audit_trail.staleness import MemberStaleness
from etcd_users.transport.native import native_lock
from etcd_users.transport.watch_counts import WatchCounts


@dataclass
class RunRecord:
    ledger: Ledger
    watches: WatchCounts = field(default_factory=WatchCounts)
    reads: ReadChecks = field(default_factory=ReadChecks)
    # the clients of a process note into the ledger and the reads from two threads when a run mixes users on greenlets
    # and on the loop thread (``notes``): one note at a time
    lock: Any = field(default_factory=native_lock)


@dataclass
class AuditState:
    """The audit's slot on the run's context: the current run's record (None: the audit is off) and, on the master,
    the serializable reads' staleness per member with the workers' (the stale: gates at quitting)."""

    record: RunRecord | None = None
    final_staleness: Callable[[], dict[str, MemberStaleness]] = dict
