"""The exporter: the run's live metrics for Prometheus (``--etcd-prometheus-*``;
``etcd_users.features.exporter.exporter``)."""

from dataclasses import dataclass

from etcd_users.core.arguments import shown
from etcd_users.core.declare import OptionGroup, SettingsError, option

PROMETHEUS_WINDOW_MAX = 3600  # seconds: the exporter keeps each second of the window in memory


def _port(flag: str, value: int) -> int:
    if not 0 <= value <= 65535:
        raise SettingsError(
            f"{flag}: {shown(value)} is not a TCP port; give one from 1 to 65535 (e.g. 9647), or 0 for no exporter"
        )
    return value


def _window(flag: str, value: int) -> int:
    if not 1 <= value <= PROMETHEUS_WINDOW_MAX:
        raise SettingsError(f"{flag}: {shown(value)} seconds is outside 1 to {PROMETHEUS_WINDOW_MAX}; give e.g. 10")
    return value


@dataclass(frozen=True, kw_only=True)
class ExporterSettings(OptionGroup):
    TITLE = "etcd exporter"
    DESCRIPTION = "The run's live metrics for Prometheus"
    SLICE = "exporter"

    port: int = option(
        "--etcd-prometheus-port",
        0,
        "Serve the run's live metrics for Prometheus at http://HOST:PORT/metrics from the master or the single "
        "process (0: off; HOST is --web-host), and at /etcd/metrics of the web UI (see Prometheus and Grafana).",
        parse=_port,
    )
    window: int = option(
        "--etcd-prometheus-window",
        10,
        "Seconds of the latest merged latencies behind the exporter's exact quantiles and its SLA gates (1 to 3600).",
        parse=_window,
    )
