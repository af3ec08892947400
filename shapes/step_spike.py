"""StepSpikeShape, loaded by path after the locustfile: ``locust -f locustfile.py,shapes/step_spike.py``."""

from etcd_users.features.shapes.step_spike import StepSpikeShape  # noqa: F401  (Locust takes the shape from this module)
