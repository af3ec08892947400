"""Load-test etcd with Locust: pick a workload class on the command line.

    locust -f locustfile.py --headless -u 64 -r 64 -t 30s --csv out/run EtcdPutUser

With no --etcd-endpoints a throwaway local etcd is started. ``python -m etcd_users`` lists the options. An installed
tool runs the same classes without a clone: ``locust-etcd`` (``etcd_users/locustfile.py``).
"""

from etcd_users.locustfile import *  # noqa: F403  (Locust collects the User classes of the packaged locustfile)
