"""``python -m etcd_users.cluster``: the earlier name of ``python -m etcd_users.local``, the same command."""

import sys

from etcd_users.local.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
