"""The settings of a run: flat where every request reads (the connection and the workload), and a slice for each
feature with options of its own (``settings.audit``, ``settings.gates``), built from the features' own groups
(``etcd_users.core.features``) in their order."""

import argparse
from dataclasses import dataclass, field, replace

from etcd_users.core.arguments import shown
from etcd_users.core.declare import OptionGroup, SettingsError
from etcd_users.core.features import features
from etcd_users.settings.connection import RAISE_LIMIT, REQUEST_OVERHEAD_BYTES, ConnectionSettings
from etcd_users.settings.network import check_zones, timing_ms
from etcd_users.settings.workload import WorkloadSettings

# each further put of a txn adds this much to etcd's raft entry
TXN_OP_OVERHEAD_BYTES = 16


def slice_groups() -> tuple[type[OptionGroup], ...]:
    """The features' groups that are a slice of the run's settings, in the features' order."""
    return tuple(feature.options for feature in features() if feature.options is not None and feature.options.SLICE)


@dataclass(frozen=True, kw_only=True)
class EtcdSettings(ConnectionSettings, WorkloadSettings):
    """Flat where the request path reads (connection and workload), a slice for each other feature: ``slices`` by
    their ``SLICE`` name, each also an attribute (``settings.gates``)."""

    slices: dict[str, OptionGroup] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, value in self.slices.items():  # plain attributes: no look-up cost where a request reads one
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str):
        raise AttributeError(f"the run's settings have no {name!r}: no feature's options have that SLICE")

    def with_slice(self, value: OptionGroup) -> "EtcdSettings":
        """These settings with one feature's slice replaced."""
        return replace(self, slices={**self.slices, type(value).SLICE: value})

    @classmethod
    def build(cls, values, namespace, **context):
        groups = slice_groups()
        slices = {group.SLICE: group.from_options(namespace, **values) for group in groups}
        settings = cls(**values, slices=slices)
        settings.check_keys()
        timing_ms(settings.local_heartbeat, settings.local_election)
        if not (settings.local_zones and settings.endpoints):  # those of --etcd-endpoints: target_cluster refuses
            check_zones(settings.local_zones, settings.local_zone_rtt, settings.local_peer_rtt, settings.local_members)
        _check_request_sizes(settings)
        for group in groups:
            group.check_run(settings)
        return settings.with_credentials()


_parsed: tuple[tuple, EtcdSettings] | None = None


def settings_from_options(options: argparse.Namespace) -> EtcdSettings:
    """Validate the parsed ``--etcd-*`` options (also as the web UI sends them) into settings: the one place a
    process parses them, once for each set of options (the master's checks, a worker's run, the users' session
    and the audit share one).

    Each value is checked for what it means, not only for its type: finite numbers, sizes that fit in one etcd
    request, lists without empty entries, URLs that parse, PEM files that OpenSSL loads, and a prefix that is a
    directory. Bad input is one line (``SettingsError``) that names the option, quotes long input shortened.
    """
    global _parsed
    key = tuple(sorted((name, repr(value)) for name, value in vars(options).items() if name.startswith("etcd_")))
    if _parsed is None or _parsed[0] != key:
        _parsed = (key, EtcdSettings.from_options(options))
    return _parsed[1]


def _check_request_sizes(settings: EtcdSettings) -> None:
    """A put (key + value), a transaction of --etcd-txn-ops puts and the key alone fit in one etcd request."""
    key_size, val_size, txn_ops = settings.key_size, settings.val_size, settings.txn_ops
    max_bytes = settings.max_request_bytes
    user = settings.user.partition(":")[0]
    overhead = REQUEST_OVERHEAD_BYTES + len(user.encode())  # the request's header carries the user name
    limit = f"etcd's --max-request-bytes, 1.5 MiB by default (--etcd-max-request-bytes {max_bytes} here)"
    if key_size + overhead > max_bytes:
        raise SettingsError(
            f"--etcd-key-size: {shown(key_size)} makes every request larger than {limit}; use at most "
            f"{max_bytes - overhead} {RAISE_LIMIT}"
        )
    if key_size + val_size + overhead > max_bytes:
        raise SettingsError(
            f"--etcd-val-size: a put of a {key_size}-byte key and a {shown(val_size)}-byte value is larger than "
            f"{limit}; use at most {max_bytes - overhead - key_size} {RAISE_LIMIT}"
        )
    per_put = key_size + val_size + TXN_OP_OVERHEAD_BYTES
    if overhead - TXN_OP_OVERHEAD_BYTES + txn_ops * per_put > max_bytes:
        most = (max_bytes - overhead + TXN_OP_OVERHEAD_BYTES) // per_put
        raise SettingsError(
            f"--etcd-txn-ops: a transaction of {txn_ops} puts of {key_size}+{val_size} bytes is larger than "
            f"{limit}; use at most {most} puts or a smaller --etcd-val-size, {RAISE_LIMIT}"
        )
