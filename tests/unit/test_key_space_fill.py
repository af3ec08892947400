"""Which workloads have the key space written before the run, and which send at --etcd-user-rate."""

from __future__ import annotations

from etcd_users import users
from etcd_users.key_space_fill import reads_key_space


def test_the_ready_workloads_that_read_the_key_space_have_it_written_first_and_which_follow_the_rate():
    ready = {name: cls for name, cls in vars(users).items() if isinstance(cls, type) and name.endswith("User")}
    reading = {name for name, cls in ready.items() if reads_key_space([cls])}
    assert reading == {
        *("EtcdRangeUser", "LinearizableRangeUser", "SerializableRangeUser", "_RangeUser"),
        *("EtcdTxnMixedUser", "EtcdMixedUser", "EtcdYcsbUser"),
    }
    assert not reads_key_space([ready["EtcdPutUser"], ready["EtcdKubernetesUser"]])
    unscheduled = {name for name, cls in ready.items() if issubclass(cls, users.EtcdUser) and not cls.follows_user_rate}
    assert unscheduled == {"EtcdWatcherUser", "EtcdKubernetesNodeUser"}
