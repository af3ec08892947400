"""Kubernetes-shaped workloads: kube-apiserver's traffic (``EtcdKubernetesUser``) and the kubelets' heartbeats
(``EtcdKubernetesNodeUser``)."""

from locust import task
from locust.user.users import LOCUST_STATE_RUNNING

from etcd_users.features.kubernetes.client import KubernetesClient
from etcd_users.user_base.user import EtcdUser


class EtcdKubernetesUser(EtcdUser):
    """kube-apiserver's traffic (etcd's client/v3/kubernetes and robustness "Kubernetes" mix): gets, paged lists,
    counts and a watch per resource, optimistic creates, updates and deletes of ``--etcd-k8s-objects`` under
    ``PREFIX RESOURCE/NAMESPACE/NAME`` (``k8s/…`` rows; a failed compare is the failure ``k8s: conflict``)."""

    k8s_prefill = ("objects",)

    def __init__(self, environment) -> None:
        super().__init__(environment)
        self.etcd = KubernetesClient(environment)

    @task
    def kubernetes(self) -> None:
        self.repeat(self.etcd.operation)


class EtcdKubernetesNodeUser(EtcdUser):
    """Kubelets' heartbeats: each of ``--etcd-k8s-nodes`` nodes' Lease (namespace kube-node-lease) updated every
    ``--etcd-k8s-lease-period`` seconds (``k8s/lease-renew``), each renewal in a greenlet of its own when due. One
    such user per run (``fixed_count``) drives every node, whatever ``-u`` and the workers."""

    fixed_count = 1
    follows_user_rate = False  # its schedule is the lease period
    k8s_prefill = ("nodes",)

    def __init__(self, environment) -> None:
        super().__init__(environment)
        self.etcd = KubernetesClient(environment)

    @task
    def heartbeats(self) -> None:
        self.etcd.heartbeats(lambda: self._state == LOCUST_STATE_RUNNING)
