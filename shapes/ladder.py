"""ConcurrencyLadderShape, loaded by path after the locustfile: ``locust -f locustfile.py,shapes/ladder.py``."""

from etcd_users.features.shapes.ladder import ConcurrencyLadderShape  # noqa: F401  (Locust takes the shape from this module)
