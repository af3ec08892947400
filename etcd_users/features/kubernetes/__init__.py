"""Kubernetes-shaped traffic: its users (``users``: kube-apiserver's traffic, the kubelets' heartbeats),
kube-apiserver's calls to etcd (``client``), its key layout and the workload's choices (``layout``, pure), and what a
run does around them on the master (``run``: the objects written first, compaction).
"""

from etcd_users.core.features import Feature
from etcd_users.features.kubernetes.options import KubeSettings

FEATURE = Feature(
    "Kubernetes-shaped traffic",
    KubeSettings,
    hooks="run:KubernetesRun",
    docs="workloads.md",
    users=("users:EtcdKubernetesUser", "users:EtcdKubernetesNodeUser"),
    public=("users",),
)
