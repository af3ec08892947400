"""One load shape per file, to load by path after the locustfile (``locust -f locustfile.py,shapes/step_spike.py``).

The shapes live in ``etcd_users.features.shapes``; an installed tool takes them by name (``locust-etcd --shape
step-spike``).
"""
