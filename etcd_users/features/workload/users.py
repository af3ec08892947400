"""The lease workload: a user that grants one lease and keeps it alive on one stream (``EtcdLeaseUser``)."""

from locust import task

from etcd_users.user_base.user import EtcdUser


class EtcdLeaseUser(EtcdUser):
    """Grants one lease (``lease-grant``), then keeps it alive in a loop on one stream (``lease-keepalive``)."""

    lease_ttl = 60
    lease_id: int | None = None

    @task
    def keep_alive(self) -> None:
        if self.lease_id is None:
            granted = self.etcd.lease_grant(self.lease_ttl)
            if granted is None:
                return  # the failure is counted; the next run of the task tries again
            self.lease_id = granted.ID
        lease_id, keep_alive = self.lease_id, self.etcd.lease_keep_alive
        self.repeat(lambda: keep_alive(lease_id))

    def on_stop(self) -> None:
        self.etcd.stop_streams()
        if self.lease_id is not None:
            self.etcd.lease_revoke(self.lease_id)
