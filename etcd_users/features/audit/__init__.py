"""The audit at the end of a run that wrote: every member's HashKV at one revision, each process's acknowledged
writes (``etcd_users.audit_trail``, as the clients noted them) read back (``readback``), the watch streams' counts
(``etcd_users.transport.watch_counts``), judged on the master or single process (``verdict``) and wired into the run
(``run``)."""

from etcd_users.core.features import Feature
from etcd_users.features.audit.options import AuditSettings

FEATURE = Feature("audit", AuditSettings, hooks="run:AuditRun", docs="audit.md")
