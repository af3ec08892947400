"""SineWaveShape, loaded by path after the locustfile: ``locust -f locustfile.py,shapes/sine.py``."""

from etcd_users.features.shapes.sine import SineWaveShape  # noqa: F401  (Locust takes the shape from this module)
