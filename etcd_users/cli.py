"""``locust-etcd``: Locust with the tool's packaged locustfile, and a load shape picked by name.

    locust-etcd --headless -u 64 -r 64 -t 30s --csv out/run EtcdPutUser
    locust-etcd --shape step-spike --headless --etcd-user-rate 10 --shape-time-scale 0.05 EtcdPutUser

``--shape NAME`` adds that shape's module to the locustfiles; every other argument goes to Locust unchanged, so
``--processes``, ``--master`` and ``--worker`` work as with ``locust``. The script chooses the locustfile: ``-f`` is
refused (``locust -f`` runs a locustfile of your own). Bad input is one line and exit code 2.

Nothing here imports Locust: the command line is read, then this process becomes ``python -m locust``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

PROG = "locust-etcd"
ERROR_PREFIX = f"{PROG}: error: "
PACKAGE = Path(__file__).resolve().parent
LOCUSTFILE = PACKAGE / "locustfile.py"
SHAPES = {
    "step-spike": PACKAGE / "features" / "shapes" / "step_spike.py",
    "ladder": PACKAGE / "features" / "shapes" / "ladder.py",
    "sine": PACKAGE / "features" / "shapes" / "sine.py",
    "capacity": PACKAGE / "features" / "shapes" / "capacity.py",
}

HELP = f"""\
usage: {PROG} [--shape {{{",".join(SHAPES)}}}] [Locust's options] [UserClass ...]

Runs Locust with the tool's workloads (its packaged locustfile); every argument but --shape goes to Locust.

  --shape NAME   a load shape: {", ".join(SHAPES)}
                 (step-spike, sine and capacity target QPS: give --etcd-user-rate too)

The tool's options (Locust's help below cannot list them: it answers before loading the locustfile):
  python -m etcd_users   every --etcd-* and --shape-* option, with its environment variable and default
For a locustfile of your own, run locust -f yourfile.py.

Locust's help:
"""


class UsageError(Exception):
    """Bad input: one line after ``locust-etcd: error:``."""


def locust_arguments(argv: Sequence[str]) -> list[str]:
    """Locust's command line for ``locust-etcd argv``: ``-f`` with the packaged locustfile (and the shape's module),
    then ``argv`` without ``--shape``. Raises UsageError."""
    shape: str | None = None
    rest: list[str] = []
    arguments = iter(argv)
    for argument in arguments:
        if argument == "--":  # what follows is not options (Locust takes none there): passed on as it is
            rest.append(argument)
            rest.extend(arguments)
            break
        if argument == "--shape" or argument.startswith("--shape="):
            if shape is not None:
                raise UsageError("--shape: given twice; a run has one shape")
            value = argument.partition("=")[2] if "=" in argument else next(arguments, None)
            if value is None:
                raise UsageError(f"--shape: expected a name, one of: {', '.join(SHAPES)}")
            if value not in SHAPES:
                raise UsageError(f"--shape: {value!r} is not one of: {', '.join(SHAPES)}")
            shape = value
        elif argument in ("-f", "--locustfile") or argument.startswith(("--locustfile=", "-f")):
            flag = "--locustfile" if argument.startswith("--") else "-f"
            raise UsageError(
                f"{flag}: {PROG} chooses the locustfile (its own workloads); for yours, run locust -f yourfile.py"
            )
        else:
            rest.append(argument)
    locustfiles = [str(LOCUSTFILE)] + ([str(SHAPES[shape])] if shape else [])
    return ["-f", ",".join(locustfiles), *rest]


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        arguments = locust_arguments(argv)
    except UsageError as error:
        sys.stderr.write(f"{ERROR_PREFIX}{error}\n")
        return 2
    if "-h" in argv or "--help" in argv:
        sys.stdout.write(HELP)
    command = [sys.executable, "-m", "locust", *arguments]
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name != "posix":
        return subprocess.call(command)  # no exec that keeps the process there
    # This process becomes ``python -m locust`` (exec, not locust.main.main() here): Locust's gevent patching then
    # comes first, as it must, where in this process the package was imported before it; Ctrl-C and SIGTERM reach
    # Locust itself, with no wrapper to forward them; its exit code is the command's; and --processes forks, and
    # --master/--worker run, exactly the Locust process that `locust -f` starts.
    os.execv(sys.executable, command)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
