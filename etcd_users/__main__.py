"""``python -m etcd_users``: print every option of the tool (``locust --help`` cannot list a locustfile's own)."""

from etcd_users.reference import markdown

print(markdown())
