"""When the reads' key space is written before the measured window (``hooks``);
``etcd_users.key_space_fill`` writes it."""

from etcd_users.core.features import Feature

FEATURE = Feature("key space", hooks="hooks:KeySpaceFill", docs="workloads.md")
