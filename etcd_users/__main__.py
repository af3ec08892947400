"""``python -m etcd_users``: print the ``--etcd-*`` options (``locust --help`` cannot list a locustfile's own)."""

from etcd_users.options import option_reference

print(option_reference())
