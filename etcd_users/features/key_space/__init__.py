"""The reads' key space written before the measured window: ``fill`` writes the keys, ``hooks`` says when."""

from etcd_users.core.features import Feature

FEATURE = Feature("key space", hooks="hooks:KeySpaceFill", docs="workloads.md", public=("fill",))
