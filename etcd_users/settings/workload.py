"""Workload and keys: what each request writes or reads, and how fast each user sends (``--etcd-*``).

Names mirror etcd's own ``benchmark`` tool (``--key-size --val-size --key-space-size --sequential-keys
--consistency``) under ``--etcd-``.
"""

import math
from dataclasses import dataclass

from etcd_users.core.arguments import shown
from etcd_users.core.declare import (
    OptionGroup,
    SettingsError,
    option,
    parse_weights,
    positive,
    switch,
    zero_or_more,
)
from etcd_users.workload_model.arrivals import ARRIVALS
from etcd_users.workload_model.distributions import KeyDistribution, parse_key_distribution
from etcd_users.workload_model.ycsb import INSERT_HEADROOM, YcsbWorkload, parse_workload

DEFAULT_PREFIX = "/locust-etcd/"
CONSISTENCIES = ("l", "s")
ENGINES = ("loop", "greenlet")  # etcd_users.features.engine.choice
MIX_OPERATIONS = ("put", "range", "range/linearizable", "range/serializable", "delete", "txn-put")


def parse_prefix(text: str, flag: str = "--etcd-prefix") -> bytes:
    """A key prefix that is a directory: UTF-8 text that ends in '/' and is more than slashes.

    etcd's prefix range of ``/locust-etcd`` is every key that starts with those characters, ``/locust-etcd-sentinel``
    and ``/locust-etcd0`` of another application too; the check of the prefix, the clean-up and a role's permission
    all cover that range. Ending in '/' confines them to the tool's own keys.
    """
    try:
        prefix = text.encode()
    except UnicodeEncodeError:
        raise SettingsError(
            f"{flag}: {shown(text)} is not UTF-8 text (the shell passed bytes that are not); give a prefix such as "
            f"{DEFAULT_PREFIX!r}"
        ) from None
    if prefix.strip(b"/") == b"":
        raise SettingsError(
            f"{flag}: {shown(text)} would cover the whole key space; give a prefix such as {DEFAULT_PREFIX!r}"
        )
    if not prefix.endswith(b"/"):
        raise SettingsError(
            f"{flag}: {shown(text)} does not end in '/', and etcd's prefix range of {shown(text)} also covers "
            f"other applications' keys such as {shown(text + '-sentinel')}; give {shown(text + '/')}"
        )
    return prefix


def _prefix(flag: str, text: str) -> bytes:
    return parse_prefix(text, flag)


def _user_rate(flag: str, value: float) -> float:
    zero_or_more(flag, value)
    if value > 0 and not math.isfinite(1.0 / value):
        raise SettingsError(f"{flag}: {value!r} puts a request due only after forever; give e.g. 10.0")
    return value


def _key_distribution(flag: str, text: str) -> KeyDistribution:
    try:
        return parse_key_distribution(text)
    except ValueError as error:
        raise SettingsError(f"{flag}: {error}") from None


def _ycsb(flag: str, text: str) -> YcsbWorkload | None:
    try:
        return parse_workload(text)
    except ValueError as error:
        raise SettingsError(f"{flag}: {error}") from None


def parse_mix(flag: str, text: str) -> tuple[tuple[str, float], ...]:
    """``put:45,range:30,delete:25`` into ((name, weight), …)."""
    return parse_weights(flag, text, MIX_OPERATIONS, "put:45,range:30")


@dataclass(frozen=True, kw_only=True)
class WorkloadSettings(OptionGroup):
    TITLE = "etcd workload"
    DESCRIPTION = "Keys, values and the pace of the etcd users"

    key_size: int = option("--etcd-key-size", 256, "Key size in bytes, prefix included.")
    val_size: int = option("--etcd-val-size", 1024, "Value size in bytes.", parse=zero_or_more)
    key_space_size: int = option(
        "--etcd-key-space-size", 10000, "Number of distinct keys written and read.", parse=positive
    )
    sequential_keys: bool = option(
        "--etcd-sequential-keys",
        False,
        "Walk the key space in order (the same as --etcd-key-distribution sequential).",
        parse=switch,
    )
    key_distribution: KeyDistribution = option(
        "--etcd-key-distribution",
        "uniform",
        "How the key-space workloads (put, range, txn, delete, mixed) pick keys: uniform, sequential, zipfian[:THETA] "
        "(YCSB's scrambled zipfian, THETA 0.99 by default), latest[:THETA] (reads skewed toward the keys this process "
        "wrote last, writes in order) or hotspot[:HOT_FRACTION:HOT_OPS] (HOT_OPS of the requests to the first "
        "HOT_FRACTION of the keys, 0.2:0.8 by default).",
        parse=_key_distribution,
    )
    prefix: bytes = option(
        "--etcd-prefix",
        DEFAULT_PREFIX,
        "Every key starts with this prefix, a directory that ends in '/'; the tool never writes outside it.",
        parse=_prefix,
    )
    allow_existing: bool = option(
        "--etcd-allow-existing",
        False,
        "Run even if keys already exist under the prefix (by default a non-empty prefix is refused, as etcdctl check "
        "perf does).",
        parse=switch,
    )
    cleanup: bool = option(
        "--etcd-cleanup", False, "Delete every key under the prefix (and only there) when the run ends.", parse=switch
    )
    consistency: str = option(
        "--etcd-consistency",
        "l",
        "Consistency of EtcdRangeUser's reads: 'l' linearizable or 's' serializable.",
        choices=CONSISTENCIES,
    )
    engine: str = option(
        "--etcd-engine",
        "loop",
        "How the ready workloads (put, the range users, delete, txn-put, txn-mixed, mixed, YCSB) send their requests: "
        "'loop', each user's requests as a coroutine on the transport's loop thread, their results applied to Locust's "
        "statistics in batches every 0.1 s; or 'greenlet', each request from the user's greenlet, handed to the loop "
        "thread and back, as a workload of one's own always is. The run's start line says which way each class takes.",
        choices=ENGINES,
    )
    user_rate: float = option(
        "--etcd-user-rate",
        0.0,
        "Requests per second of each user on an intended schedule (0: closed loop, back to back). "
        "Late responses do not delay the schedule; latency from the intended send time is recorded too.",
        parse=_user_rate,
    )
    arrival: str = option(
        "--etcd-arrival",
        "fixed",
        "Arrivals of the rate-driven mode (--etcd-user-rate): 'fixed' intervals of 1/rate, or 'poisson', random "
        "(exponential) intervals of the same mean; latency from the intended send time is measured from each arrival.",
        choices=ARRIVALS,
    )
    range_keys: int = option(
        "--etcd-range-keys",
        1,
        "Keys each read of the range workloads covers: N consecutive keys of the key space from a drawn first key "
        "(request name 'range/N keys/…').",
        parse=positive,
    )
    range_limit: int = option(
        "--etcd-range-limit",
        0,
        "At most this many keys in each range response (etcd's limit; 0: all); needs --etcd-range-keys above 1 or "
        "--etcd-range-paginate.",
        parse=zero_or_more,
    )
    range_paginate: bool = option(
        "--etcd-range-paginate",
        False,
        "Each read of the range workloads lists the whole key space (the prefix) in pages of --etcd-range-limit keys, "
        "every page after the first at the first one's revision, as Kubernetes' paged lists do (request names "
        "'range/page N/…' per page and 'range/list N/…' per list).",
        parse=switch,
    )
    range_count_only: bool = option(
        "--etcd-range-count-only", False, "Ranges return only how many keys they hold (count_only).", parse=switch
    )
    range_keys_only: bool = option(
        "--etcd-range-keys-only", False, "Ranges return keys without values (etcd's keys_only).", parse=switch
    )
    txn_ops: int = option(
        "--etcd-txn-ops", 1, "Operations in each transaction of the txn-put and txn-mixed workloads.", parse=positive
    )
    rw_ratio: float = option(
        "--etcd-rw-ratio",
        1.0,
        "Reads per write in the txn-mixed workload (1.0: as many read transactions as write transactions).",
        parse=zero_or_more,
    )
    watch_streams: int = option(
        "--etcd-watch-streams", 1, "Watch streams opened by each EtcdWatchUser or EtcdWatcherUser.", parse=positive
    )
    watchers_per_stream: int = option(
        "--etcd-watchers-per-stream",
        1,
        "Watchers in each watch stream (on the user's key for EtcdWatchUser).",
        parse=positive,
    )
    mix: tuple[tuple[str, float], ...] = option(
        "--etcd-mix",
        "put:45,range:30,delete:25",
        "Operation weights of EtcdMixedUser as NAME:WEIGHT,… with names put, range, range/linearizable, "
        "range/serializable, delete, txn-put.",
        parse=parse_mix,
    )
    ycsb: YcsbWorkload | None = option(
        "--etcd-ycsb",
        "",
        "YCSB core workload of EtcdYcsbUser: A (50 % read, 50 % update), B (95/5), C (read only), D (95 % read, 5 % "
        "insert, latest), E (95 % scan, 5 % insert), F (50 % read, 50 % read-modify-write); zipfian keys unless "
        "D, or another --etcd-key-distribution. The key space (--etcd-key-space-size records) is loaded first.",
        parse=_ycsb,
    )

    @property
    def distribution(self) -> KeyDistribution:
        """The key distribution, --etcd-sequential-keys being sequential's other name; a YCSB workload's own unless
        another was asked for."""
        if self.sequential_keys:
            return KeyDistribution("sequential")
        if self.ycsb is not None and self.key_distribution.kind == "uniform":
            return self.ycsb.distribution
        return self.key_distribution

    @property
    def range_name(self) -> str:
        """The request name of a range of this shape, under ``range/`` with what changes what is measured;
        '' for a read of one whole key (named by its consistency alone, as ever)."""
        parts = []
        if self.range_paginate:
            parts.append(f"page {self.range_limit}")
        if self.range_keys > 1:
            parts.append(f"{self.range_keys} keys")
        if self.range_limit and not self.range_paginate:
            parts.append(f"limit {self.range_limit}")
        if self.range_count_only:
            parts.append("count-only")
        if self.range_keys_only:
            parts.append("keys-only")
        return "/".join(parts)

    @property
    def list_name(self) -> str:
        """The request name of a whole paged list, beside its pages' ``range_name``."""
        return self.range_name.replace("page ", "list ", 1)

    def _check_pagination(self) -> None:
        """A paged list needs a page size, and reads the whole prefix: no range of its own, no count alone."""
        if self.range_limit <= 0:
            raise SettingsError(
                "--etcd-range-paginate: pages need a size; give --etcd-range-limit N above 0 (Kubernetes lists 500)"
            )
        if self.range_keys > 1:
            raise SettingsError(
                f"--etcd-range-paginate: lists the whole prefix, and --etcd-range-keys asks for ranges of "
                f"{self.range_keys} keys; give only one of them"
            )
        if self.range_count_only:
            raise SettingsError(
                "--etcd-range-paginate: a --etcd-range-count-only range returns no last key to go on from; give only "
                "one of them"
            )

    @property
    def key_width(self) -> int:
        """Digits of the key counter: what the key size leaves after the prefix."""
        return self.key_size - len(self.prefix)

    def check_keys(self) -> None:
        """The key counter fits beside the prefix, and a transaction finds as many distinct keys as it puts."""
        counter_digits = len(str(self.key_space_size - 1))
        if self.key_size < len(self.prefix) + counter_digits:
            raise SettingsError(
                f"--etcd-key-size: {shown(self.key_size)} is too small for the prefix {shown(self.prefix.decode())} "
                f"({len(self.prefix)} bytes) plus a {counter_digits}-digit key counter; use at least "
                f"{len(self.prefix) + counter_digits} or a shorter --etcd-prefix"
            )
        if self.ycsb is not None and self.ycsb.inserts:
            records = self.key_space_size * INSERT_HEADROOM
            if self.key_size < len(self.prefix) + len(str(records - 1)):
                raise SettingsError(
                    f"--etcd-key-size: {shown(self.key_size)} leaves no room for the keys YCSB {self.ycsb.letter}'s "
                    f"inserts add after the {self.key_space_size} loaded records; use at least "
                    f"{len(self.prefix) + len(str(records - 1))} or a shorter --etcd-prefix"
                )
        if self.sequential_keys and self.key_distribution.kind not in ("uniform", "sequential"):
            raise SettingsError(
                f"--etcd-sequential-keys: walks the keys in order, and --etcd-key-distribution asks for "
                f"{self.key_distribution}; give only one of them"
            )
        if self.range_keys > self.key_space_size:
            raise SettingsError(
                f"--etcd-range-keys: {shown(self.range_keys)} consecutive keys do not fit in --etcd-key-space-size "
                f"{self.key_space_size}; give at most {self.key_space_size} or a larger key space"
            )
        if self.range_paginate:
            self._check_pagination()
        elif self.range_limit and self.range_keys == 1:
            raise SettingsError(
                f"--etcd-range-limit: {shown(self.range_limit)} limits a range of one key; give --etcd-range-keys N "
                "above 1 too"
            )
        if self.range_count_only and self.range_keys_only:
            raise SettingsError(
                "--etcd-range-keys-only: a --etcd-range-count-only range returns no keys at all; give only one of them"
            )
        if self.txn_ops > self.key_space_size:
            raise SettingsError(
                f"--etcd-txn-ops: {shown(self.txn_ops)} puts need as many distinct keys, but --etcd-key-space-size is "
                f"{self.key_space_size}"
            )
