"""``python -m etcd_users``: print the ``--etcd-*`` options (``locust --help`` cannot list a locustfile's own)."""

from etcd_users.arguments import reference_table
from etcd_users.settings import OPTIONS

print(reference_table(OPTIONS))
