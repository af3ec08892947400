"""The live Prometheus exporter of a run's figures (``exporter``)."""

from etcd_users.core.features import Feature
from etcd_users.features.exporter.options import ExporterSettings

FEATURE = Feature("Prometheus exporter", ExporterSettings, hooks="exporter:ExporterRun", docs="prometheus.md")
