"""The run's summary, ``PREFIX_summary.json`` (``summary``)."""

from etcd_users.core.features import Feature
from etcd_users.features.summary.options import SummarySettings

FEATURE = Feature("run summary", SummarySettings, hooks="summary:RunSummary", docs="summary.md")
