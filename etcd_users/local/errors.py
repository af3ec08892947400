"""What the local etcd raises when it cannot be found, started or queried."""


class ClusterError(RuntimeError):
    """The local etcd could not be found, started or queried."""
