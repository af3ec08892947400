"""The command line a new user types: one error prefix for every bad ``--etcd-*`` value, the User class named (or its
nearest name told), pure and on Locust's own parser. The same lines from real Locust processes are
``tests/e2e/test_user_classes.py``."""

import locust  # noqa: F401  (gevent patching before anything else loads: Locust's parser is built below)
import locust.main
from locust.argument_parser import get_parser

import pytest

from etcd_users.core.arguments import Option, add_option_group, error_line
from etcd_users.core.features import add_option_groups
from etcd_users.core.user_classes import (
    check_class_names,
    nearest,
    no_class_message,
    no_class_named,
    unknown_class_message,
)

CLASSES = {"EtcdPutUser", "EtcdRangeUser", "EtcdDeleteUser", "LinearizableRangeUser", "SerializableRangeUser"}


def etcd_parser():
    """Locust's parser with the --etcd-* options, as a locustfile that imports etcd_users gets it."""
    parser = get_parser()
    add_option_groups(parser)
    return parser


def refusal(parser, args: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(args)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    return err.strip()


# -- one prefix for every bad option --


@pytest.mark.parametrize(
    "args, message",
    [
        (["--etcd-key-size", "abc"], "--etcd-key-size: 'abc' is not a whole number; give one such as 256"),
        (["--etcd-timeout", "soon"], "--etcd-timeout: 'soon' is not a number; give one such as 5.0"),
        (["--etcd-target", "follower"], "--etcd-target: 'follower' is not one of: round-robin, leader"),
        (["--etcd-local-members", "6"], "--etcd-local-members: 6 is not one of: 1, 2, 3, 4, 5"),
        (["--etcd-consistency", "x"], "--etcd-consistency: 'x' is not one of: l, s"),
        (["--etcd-conns"], "--etcd-conns: expected one argument"),
        (["--etcd-keysize", "3"], "--etcd-keysize: no such option (did you mean --etcd-key-size?)"),
        (
            ["--etcd-ke", "3"],
            "--etcd-ke: could match --etcd-key, --etcd-key-size, --etcd-key-space-size, --etcd-key-distribution",
        ),
        (
            ["--etcd-k", "3"],
            "--etcd-k: could match --etcd-key, --etcd-key-size, --etcd-key-space-size, --etcd-key-distribution and 12 "
            "more",
        ),
    ],
)  # fmt: skip
def test_a_bad_etcd_option_is_one_line_with_the_tools_prefix(args, message, capsys):
    assert refusal(etcd_parser(), args, capsys) == f"locust-etcd: error: {message}"


def test_a_bad_value_from_the_environment_says_the_same(monkeypatch, capsys):
    monkeypatch.setenv("LOCUST_ETCD_KEY_SIZE", "12k")
    assert refusal(etcd_parser(), [], capsys).startswith("locust-etcd: error: --etcd-key-size: '12k' is not a whole")


def test_locusts_own_options_keep_locusts_errors(capsys):
    line = refusal(etcd_parser(), ["-u", "abc"], capsys)  # "locust: error: …", the program's name under pytest
    assert ": error: argument -u/--users: " in line and not line.startswith("locust-etcd")


def test_good_values_keep_their_types_and_choices_reach_the_form():
    parser = etcd_parser()
    parsed = parser.parse_args(["--etcd-key-size", "64", "--etcd-local-members", "3", "--etcd-target", "leader"])
    assert (parsed.etcd_key_size, parsed.etcd_local_members, parsed.etcd_target) == (64, 3, "leader")
    choices = {dest: action.choices for dest, action in parser.args_included_in_web_ui.items() if action.choices}
    assert choices == {
        "etcd_target": ("round-robin", "leader"),
        "etcd_local_members": (1, 2, 3, 4, 5),
        "etcd_consistency": ("l", "s"),
        "etcd_engine": ("loop", "greenlet"),
        "etcd_arrival": ("fixed", "poisson"),
    }


def test_an_error_about_another_argument_is_left_to_the_parser():
    routed = {"--etcd-key-size": "--etcd-key-size"}
    assert error_line("argument -u/--users: invalid int value: 'x'", routed, []) is None
    assert error_line("unrecognized arguments: --usrs 3", routed, ["--users"]) is None
    assert error_line("unrecognized arguments: --etcd-x", routed, []) == "locust-etcd: error: --etcd-x: no such option"


def test_a_long_bad_value_is_shown_shortened(capsys):
    parser = get_parser()
    add_option_group(parser, "t", "d", [Option("--etcd-key-size", 256, "Key size.")])
    line = refusal(parser, ["--etcd-key-size", "9" * 30 + "x" * 20_000], capsys)
    assert line.startswith("locust-etcd: error: --etcd-key-size: '999") and "… (20030 characters)" in line
    assert len(line) < 200


# -- the User classes --


def test_the_nearest_name_forgives_case_and_a_typo():
    assert nearest("EtcdPutUsr", CLASSES) == "EtcdPutUser"
    assert nearest("etcdputuser", CLASSES) == "EtcdPutUser"
    assert nearest("SerializableRange", CLASSES) == "SerializableRangeUser"
    assert nearest("Zebra", CLASSES) is None


def test_an_unknown_class_line_has_the_nearest_name_and_the_list():
    assert unknown_class_message("EtcdPutUsr", CLASSES, ["locustfile.py"]) == (
        "'EtcdPutUsr' is not a User class of locustfile.py (did you mean EtcdPutUser?); known: EtcdDeleteUser, "
        "EtcdPutUser, EtcdRangeUser, LinearizableRangeUser, SerializableRangeUser"
    )
    assert unknown_class_message("Zebra", {"EtcdPutUser"}) == "'Zebra' is not a User class; known: EtcdPutUser"


def test_no_class_named_is_refused_only_headless_with_several_to_pick_from():
    assert no_class_named([], CLASSES, headless=True)
    assert not no_class_named(["EtcdPutUser"], CLASSES, headless=True)
    assert not no_class_named([], {"OnlyUser"}, headless=True)  # a locustfile of one class runs it, as in Locust
    assert not no_class_named([], CLASSES, headless=False)  # the web UI's picker ticks EtcdPutUser
    assert no_class_message(CLASSES, ["locustfile.py"]) == (
        "name the User classes to run at the end of the command line, e.g. EtcdPutUser (with none, Locust runs all "
        "5 of locustfile.py); known: EtcdDeleteUser, EtcdPutUser, EtcdRangeUser, LinearizableRangeUser, "
        "SerializableRangeUser"
    )


def _as_locust_main(build):
    """Call ``build`` from a function that is, to the frame check, Locust's ``main()`` with its loaded classes."""
    namespace = {"__name__": "locust.main"}
    exec("def main(available_user_classes, locustfiles, build):\n    return build()\n", namespace)
    return namespace["main"](dict.fromkeys(CLASSES), ["locustfile.py"], build)


def test_a_misspelt_class_is_refused_while_the_command_line_is_parsed(capsys):
    def build():
        parser = etcd_parser()
        check_class_names(parser)
        return parser

    parser = _as_locust_main(build)
    assert parser.parse_args(["--etcd-conns", "2", "EtcdPutUser", "EtcdRangeUser"]).user_classes == [
        "EtcdPutUser",
        "EtcdRangeUser",
    ]
    line = refusal(parser, ["EtcdPutUser", "EtcdRangeUsr"], capsys)
    assert line.startswith("locust-etcd: error: 'EtcdRangeUsr' is not a User class of locustfile.py (did you mean ")
    # a misspelt option's value lands among the class names: the option is what to tell
    line = refusal(parser, ["--etcd-keysize", "64", "EtcdPutUser"], capsys)
    assert line == "locust-etcd: error: --etcd-keysize: no such option (did you mean --etcd-key-size?)"


def test_a_misspelt_class_in_locust_user_classes_is_refused(monkeypatch, capsys):
    monkeypatch.setenv("LOCUST_USER_CLASSES", "EtcdPutUsr")

    def build():
        parser = get_parser()
        check_class_names(parser)

    with pytest.raises(SystemExit) as exited:
        _as_locust_main(build)
    assert exited.value.code == 2
    assert capsys.readouterr().err.startswith(
        "locust-etcd: error: LOCUST_USER_CLASSES: 'EtcdPutUsr' is not a User class of locustfile.py (did you mean "
    )


def test_without_locusts_main_on_the_stack_the_names_are_left_to_locust():
    parser = etcd_parser()
    check_class_names(parser)  # the web UI's parser, built to list the form's options
    assert parser.parse_args(["Anything"]).user_classes == ["Anything"]


def test_locusts_main_still_holds_what_the_check_reads():
    # check_class_names reads these locals of locust.main.main(); a Locust that renames them must fail here
    code = locust.main.main.__code__
    assert {"available_user_classes", "locustfiles"} <= {*code.co_varnames, *code.co_cellvars}


def test_a_variable_the_tool_no_longer_reads_is_named_with_its_new_name(monkeypatch, capsys):
    monkeypatch.setenv("ETCD_KEY_SIZE", "64")
    monkeypatch.delenv("LOCUST_ETCD_KEY_SIZE", raising=False)
    namespace = etcd_parser().parse_args([])
    assert namespace.etcd_key_size == 256  # etcd's namespace: not read
    assert capsys.readouterr().err.splitlines() == [
        "locust-etcd: warning: ETCD_KEY_SIZE is no longer read; set LOCUST_ETCD_KEY_SIZE instead"
    ]
