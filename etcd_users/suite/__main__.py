"""``python -m etcd_users.suite``: see `etcd_users.suite.cli`."""

import sys

from etcd_users.suite.cli import main

sys.exit(main())
