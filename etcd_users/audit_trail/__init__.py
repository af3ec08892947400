"""What the clients note for the audit, in each process that runs users: the acknowledged writes (``ledger``), the
reads judged against the revisions acknowledged (``acknowledged``, ``reads``, ``staleness``), the run's record on its
context (``record``) and what either engine's client notes of each answer (``notes``). Pure; the audit
(``etcd_users.features.audit``) reads them at a run's end."""
