"""``python -m analysis``: the post-run analysis of ``etcd_users.analysis``."""

import sys

from etcd_users.analysis.__main__ import main

sys.exit(main())
