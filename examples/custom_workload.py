"""A workload of your own: each user writes a key, then reads it back serializably and checks it is not stale.

    locust -f examples/custom_workload.py --headless -u 8 -r 8 -t 10s --csv out/custom

Subclass ``EtcdUser``: ``self.etcd`` is the tool's instrumented client (put, range, delete, txn), each call one Locust
request under the name given, and ``self.repeat`` runs the operation back to back or at ``--etcd-user-rate`` per
second. Keys come from the key space under ``--etcd-prefix`` (``self.etcd.keys``); a write outside it is refused.
Every ``--etcd-*`` option applies (``python -m etcd_users`` lists them); with no ``--etcd-endpoints`` a throwaway
local etcd is started.
"""

from locust import task

from etcd_users import EtcdUser


class WriteThenReadUser(EtcdUser):
    """A put (``write``), then a serializable range of the same key (``read-back``); a read that misses the write
    is counted as the failure ``read-back/stale``."""

    @task
    def write_then_read(self) -> None:
        etcd, keys = self.etcd, self.etcd.keys

        def write_then_read() -> None:
            key = keys.next_key()
            written = etcd.put(key, keys.value, name="write")
            if written is None:
                return  # the failure is counted under "write"; nothing to read back
            # serializable: answered by whichever member the next connection reaches, which may lag behind the leader
            read = etcd.range(key, serializable=True, name="read-back")
            if read is not None and (not read.kvs or read.kvs[0].mod_revision < written.header.revision):
                self.environment.events.request.fire(
                    request_type="etcd",
                    name="read-back/stale",
                    response_time=0,
                    response_length=0,
                    exception="an older revision than the one written",  # one label: one failures row
                )

        self.repeat(write_then_read)
