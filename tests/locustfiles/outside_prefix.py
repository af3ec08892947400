"""Users that try to write outside ``--etcd-prefix``: the tool must refuse before anything reaches etcd.

Each class tries one way: a put, a delete whose range runs past the prefix, and a put nested in a transaction.
"""

from locust import constant, task

from etcd3.etcdrpc import rpc_pb2

from etcd_users import EtcdUser


class _Outside(EtcdUser):
    abstract = True
    wait_time = constant(0.5)  # each refusal is logged with its traceback: keep them few


class PutOutsideUser(_Outside):
    @task
    def put_outside(self) -> None:
        self.etcd.put(b"/outside", b"x")


class DeletePastPrefixUser(_Outside):
    @task
    def delete_past_the_prefix(self) -> None:
        # starts under the prefix, ends after it: would delete /locust-etcd0 and everything up to /z
        self.etcd.delete(self.etcd.keys.prefix + b"a", b"/z")


class NestedTxnPutUser(_Outside):
    @task
    def put_in_a_nested_txn(self) -> None:
        put = rpc_pb2.RequestOp(request_put=rpc_pb2.PutRequest(key=b"/nested", value=b"x"))
        self.etcd.txn(success=[rpc_pb2.RequestOp(request_txn=rpc_pb2.TxnRequest(success=[put]))])
