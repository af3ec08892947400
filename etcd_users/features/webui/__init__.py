"""The web UI's etcd tabs and its start form (``tabs``), the members as the run follows them (``endpoints_tab``)."""

from etcd_users.core.features import Feature

FEATURE = Feature("web UI", hooks="tabs:WebUiTabs", docs="getting-started.md")
