"""Monitoring: what the tool watches of the members during a run, and what it does to their history
(``--etcd-metrics-*``, the start-up check, compaction, the profiles at a breach)."""

from dataclasses import dataclass

from etcd_users.core.arguments import shown
from etcd_users.core.declare import OptionGroup, SettingsError, list_items, option, switch, zero_or_more
from etcd_users.settings.connection import Endpoint, _url_parts

PROFILE_ON_BREACH_MAX = 300.0  # seconds: a CPU profile longer than a few minutes no longer shows the breach


def _profile_on_breach(flag: str, value: float) -> float:
    zero_or_more(flag, value)
    if value > PROFILE_ON_BREACH_MAX:
        raise SettingsError(
            f"{flag}: {shown(value)} seconds is too long a profile; give at most {PROFILE_ON_BREACH_MAX:g} (e.g. 10), "
            "or 0 for none"
        )
    return value


def _metrics_urls(flag: str, text: str) -> tuple[str, ...]:
    urls = tuple(list_items(flag, text, "URLs", "each client URL + /metrics"))
    for url in urls:
        parts, _ = _url_parts(url)
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise SettingsError(f"{flag}: {shown(url)} is not a URL; write http://HOST:PORT/metrics")
    return urls


@dataclass(frozen=True, kw_only=True)
class MonitoringSettings(OptionGroup):
    TITLE = "etcd monitoring"
    DESCRIPTION = "The members' metrics, the start-up check, compaction and the profiles at a breach"
    SLICE = "monitoring"

    metrics_urls: tuple[str, ...] = option(
        "--etcd-metrics-urls",
        "",
        "Comma-separated Prometheus URLs of the members, one per endpoint in the same order (for etcd's "
        "--listen-metrics-urls). Empty: each client URL + /metrics.",
        parse=_metrics_urls,
    )
    metrics_interval: float = option(
        "--etcd-metrics-interval",
        5.0,
        "Seconds between polls of every member's /metrics during a run (0: off): they watch each db against its "
        "quota and etcd's alarms, and go to PREFIX_etcd_metrics.csv with --csv PREFIX.",
        parse=zero_or_more,
    )
    skip_preflight: bool = option(
        "--etcd-skip-preflight",
        False,
        "Skip the start-up write burst (200 small puts under the prefix, deleted at once) that measures each "
        "member's WAL fsync P99; versions and db size against quota are still reported.",
        parse=switch,
    )
    compact_interval: float = option(
        "--etcd-compact-interval",
        0.0,
        "Seconds between compactions of etcd's history during the run, each at the revision of that many seconds ago "
        "(like benchmark put --compact-interval; 0: off), by the master only. Compaction is cluster-wide: use it on a "
        "cluster whose history you may drop. The local etcd compacts itself every 5 s.",
        parse=zero_or_more,
    )
    profile_on_breach: float = option(
        "--etcd-profile-on-breach",
        0.0,
        "When a gate first fails during a run, take a CPU profile of that many seconds (0: off; at most 300), the "
        "goroutines, the heap and /metrics of every member into PREFIX_breach/ (with --csv PREFIX only), in the "
        "background. The members need etcd's --enable-pprof.",
        parse=_profile_on_breach,
    )
    local_pprof: bool = option(
        "--etcd-local-pprof",
        False,
        "Start the local etcd's members with --enable-pprof (for --etcd-profile-on-breach).",
        parse=switch,
    )

    @classmethod
    def build(cls, values, namespace, endpoints: tuple[Endpoint, ...] = (), **context):
        urls = values["metrics_urls"]
        if urls and endpoints and len(urls) != len(endpoints):
            raise SettingsError(
                f"--etcd-metrics-urls: {len(urls)} URLs for {len(endpoints)} --etcd-endpoints; give one per endpoint, "
                "in the same order, or none to use each client URL + /metrics"
            )
        return cls(**values)
