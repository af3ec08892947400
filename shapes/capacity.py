"""CapacitySearchShape, loaded by path after the locustfile: ``locust -f locustfile.py,shapes/capacity.py``."""

from etcd_users.features.shapes.capacity import CapacitySearchShape  # noqa: F401  (Locust takes the shape from this module)
