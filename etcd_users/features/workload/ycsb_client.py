"""YCSB's operations on etcd (``--etcd-ycsb``), each reported as one Locust request ``ycsb/…``.

- read (``ycsb/read``): a range of one key, linearizable unless ``--etcd-consistency s``;
- update (``ycsb/update``): a put of a loaded key, the whole ``--etcd-val-size`` value (YCSB's 10 fields × 100 B);
- insert (``ycsb/insert``): a put of a new key past the loaded ones; once acknowledged, reads ("latest") and scans
  reach it;
- scan (``ycsb/scan``): a range of 1–100 consecutive keys from a drawn one;
- read-modify-write (``ycsb/rmw``): a range of a key then a put of it, timed as one operation from the range's send
  to the put's acknowledgement, as YCSB times it; a failure of either is the operation's failure.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import random
from collections.abc import Callable

from etcd3.etcdrpc import rpc_pb2

from etcd_users.user_base.client import EtcdClient
from etcd_users.workload_model import ycsb


class YcsbClient(EtcdClient):
    """``self.etcd`` of an EtcdYcsbUser: the operations of ``--etcd-ycsb``'s workload."""

    def operation(self) -> Callable[[], object]:
        """One request of the workload per call, its operation drawn by the workload's proportions."""
        settings = self.session.settings
        workload = settings.ycsb
        uniform = random.Random().random
        keys, value = self.keys, self.keys.value
        serializable = settings.consistency == "s"
        read_name, update_name = ycsb.request_name(ycsb.READ), ycsb.request_name(ycsb.UPDATE)
        scan_name, scan_length = ycsb.request_name(ycsb.SCAN), ycsb.scan_lengths(uniform)
        operations = {
            ycsb.READ: lambda: self.range(keys.next_key(), serializable=serializable, name=read_name),
            ycsb.UPDATE: lambda: self.put(keys.next_key(), value, name=update_name),
            ycsb.INSERT: self.insert,
            ycsb.SCAN: lambda: self.range(*keys.scan_of(scan_length()), serializable=serializable, name=scan_name),
            ycsb.RMW: lambda: self.read_modify_write(keys.next_key(), value, serializable),
        }
        choose = ycsb.chooser(workload, uniform)
        return lambda: operations[choose()]()

    def insert(self) -> rpc_pb2.PutResponse | None:
        keys = self.keys
        index = keys.new_index()
        response = self.put(keys.key(index), keys.value, name=ycsb.request_name(ycsb.INSERT))
        if response is not None:
            keys.inserted(index)
        return response

    def read_modify_write(self, key: bytes, value: bytes, serializable: bool) -> rpc_pb2.PutResponse | None:
        self._check_prefix(key)
        name = ycsb.request_name(ycsb.RMW)
        connection = self.session.pool.next_connection()
        read = rpc_pb2.RangeRequest(key=key, serializable=serializable)
        _, error, seconds, ended = self._unary(connection, connection.kv.Range, read)
        if error is not None:
            return self._report(name, None, error, seconds, ended)
        sent = ended - seconds
        connection = self.session.pool.next_connection()
        response, error, _, ended = self._unary(connection, connection.kv.Put, rpc_pb2.PutRequest(key=key, value=value))
        if response is not None and self._notes is not None:
            self._notes.put(key, response.header.revision, ended)
        return self._report(name, response, error, ended - sent, ended)
