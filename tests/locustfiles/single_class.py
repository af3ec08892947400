"""A locustfile of one User class: Locust runs it with no class named, as it always has."""

from etcd_users import EtcdPutUser  # noqa: F401  (Locust collects the User classes from this module)
