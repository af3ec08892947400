"""Which workloads a run starts: the User classes named on the command line, never all of them by accident.

Locust runs every User class of the locustfile when none is named (all fourteen workloads of ``locustfile.py``, with the
read workloads' 10,000 keys written first), and answers a misspelt name with "Unknown User(s)" and exit code 1,
which this tool's exit codes keep for failed requests. Here instead:

- a name that is not one of the locustfile's classes is refused while Locust parses the command line, before
  anything starts: one line with the nearest name and the classes, exit code 2 (``check_class_names``, a ``type=``
  on Locust's ``user_classes`` positional, wired by ``etcd_users.core.plugin``);
- a headless run that names none, of a locustfile with several, is refused at init the same way
  (``no_class_named``); a locustfile with one class runs it, as in Locust;
- the web UI's class picker ticks ``DEFAULT_CLASS`` alone (``etcd_users.features.webui.tabs``).

The messages and the nearest name are pure; ``check_class_names`` reads the classes Locust's ``main()`` has loaded.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from collections.abc import Iterable, Sequence

from etcd_users.core.arguments import ERROR_PREFIX, route_errors, shown

DEFAULT_CLASS = "EtcdPutUser"  # what the web UI's picker ticks, and the example the messages give
USER_CLASSES_DEST = "user_classes"  # Locust's positional: the classes named at the end of the command line


# -- pure: the nearest name and the lines --


def nearest(name: str, known: Iterable[str]) -> str | None:
    """The known class ``name`` most likely meant (case aside first, then by difflib's ratio), or None."""
    known = sorted(known)
    by_lower = {candidate.lower(): candidate for candidate in known}
    if name.lower() in by_lower:
        return by_lower[name.lower()]
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[close[0]] if close else None


def _of(locustfiles: Sequence[str]) -> str:
    return f" of {', '.join(map(_display, locustfiles))}" if locustfiles else ""


def unknown_class_message(name: str, known: Iterable[str], locustfiles: Sequence[str] = ()) -> str:
    """``'EtcdPutUsr' is not a User class of locustfile.py (did you mean EtcdPutUser?); known: …``"""
    known = sorted(known)
    guess = nearest(name, known)
    hint = f" (did you mean {guess}?)" if guess else ""
    return f"{shown(name)} is not a User class{_of(locustfiles)}{hint}; known: {', '.join(known)}"


def no_class_message(known: Iterable[str], locustfiles: Sequence[str] = ()) -> str:
    """The line of a headless run that names no class of a locustfile that has several."""
    known = sorted(known)
    example = DEFAULT_CLASS if DEFAULT_CLASS in known else known[0]
    return (
        f"name the User classes to run at the end of the command line, e.g. {example} (with none, Locust runs all "
        f"{len(known)}{_of(locustfiles)}); known: {', '.join(known)}"
    )


def no_class_named(named: Sequence[str], available: Iterable[str], headless: bool) -> bool:
    """A run to refuse: headless (nobody to pick in a form), no class named, and more than one to pick from."""
    return headless and not named and len(list(available)) > 1


# -- in Locust: the names on the command line --


def check_class_names(parser: argparse.ArgumentParser) -> None:
    """Refuse, as the command line is parsed, a class name that is not one of the loaded locustfiles' classes.

    Locust loads the locustfiles, then builds this parser (firing ``init_command_line_parser``), then parses the
    command line and only then compares the names. The classes it loaded are ``available_user_classes`` in its
    ``main()``, which is on the stack now; elsewhere (a parser Locust's web UI builds to list the form's options,
    a test's) there is nothing to check against, and the names are left to Locust.
    """
    loaded = _loaded_by_locust_main()
    action = next((action for action in parser._actions if action.dest == USER_CLASSES_DEST), None)
    if loaded is None or action is None:
        return
    known, locustfiles = loaded
    unknown: list[str] = []
    parse_known_args = parser.parse_known_args

    def class_name(text: str) -> str:
        if text not in known:
            unknown.append(text)
        return text

    def parse_known_args_then_check(*args, **kwargs):
        # after the parse: a misspelt option's value lands among the names, and the option is the one to tell
        unknown.clear()
        namespace, extras = parse_known_args(*args, **kwargs)
        if unknown and not extras:
            parser.error(f"argument {name}: {unknown_class_message(unknown[0], known, locustfiles)}")
        return namespace, extras

    name = action.metavar or action.dest  # how argparse names a positional in its errors
    action.type = class_name
    parser.parse_known_args = parse_known_args_then_check
    route_errors(parser, {name: ""})
    # LOCUST_USER_CLASSES is the positional's default, which argparse takes as it is: check it here
    for name in action.default or ():
        if name not in known:
            message = unknown_class_message(name, known, locustfiles)
            sys.stderr.write(f"{ERROR_PREFIX}LOCUST_USER_CLASSES: {message}\n")
            sys.exit(2)


def locust_main_locals() -> dict | None:
    """The local variables of the ``locust.main.main()`` on this stack, None without one."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "main" and frame.f_globals.get("__name__") == "locust.main":
            return frame.f_locals
        frame = frame.f_back
    return None


def _loaded_by_locust_main() -> tuple[set[str], list[str]] | None:
    """The User class names and the locustfiles of the ``locust.main.main()`` on this stack, None without one."""
    found = locust_main_locals()
    names = found.get("available_user_classes") if found is not None else None
    if not isinstance(names, dict):
        return None
    return set(names), list(found.get("locustfiles") or [])


def _display(path: str) -> str:
    """A locustfile as the command line likely gave it: relative to the working directory when under it."""
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return path if relative.startswith("..") else relative
