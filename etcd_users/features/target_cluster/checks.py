"""What a master or single process refuses at init, before anything runs: bad input ends the process with one line
and exit code 2 (the plugin's ``fail``). In the order that costs least: what the options alone tell, then the
endpoints (a local etcd starts for a run without them), then what needs the cluster.
"""

import locust  # noqa: F401  (gevent's monkey patching must come first)

from etcd_users import open_files
from etcd_users.core import features
from etcd_users.core.declare import read
from etcd_users.core.user_classes import no_class_message, no_class_named
from etcd_users.judging import junit
from etcd_users.judging.judged import judged_shape
from etcd_users.settings import EtcdSettings, SettingsError
from etcd_users.target.cluster import TargetCluster, check_prefix_free


def checked_settings(environment, target: TargetCluster, open_files_limit: int) -> EtcdSettings:
    """The run's settings from the environment's options, once every check passed; raises ``SettingsError`` (and the
    endpoints' and the local cluster's errors) with the one line to show."""
    options = environment.parsed_options
    available = environment.available_user_classes or {}
    if no_class_named(options.user_classes, available, options.headless or options.autostart):
        raise SettingsError(no_class_message(available, environment.parsed_locustfiles or ()))
    # a load shape's options (judged_shape.JudgedShape), before a local etcd starts for a run that cannot be
    shape = judged_shape(environment)
    if shape is not None and not options.class_picker:
        error = shape.options_error(options)
        if error:
            raise SettingsError(error)
    # the gates' option, read as their group reads it (the gates are a feature of their own)
    junit_path = read(next(declared for declared in features.OPTIONS if declared.flag == "--etcd-junit"), options)
    if junit_path:
        junit.check_path(junit_path)  # now, not after the run, and before a local etcd starts
    settings = target.settings(options)
    too_many = open_files.connections_error(settings.conns, len(settings.endpoints), open_files_limit)
    if too_many:
        raise SettingsError(too_many)
    # a workload that needs an option the run lacks; the class picker offers every class, to be picked later
    for user_class in environment.user_classes if not options.class_picker else ():
        lacking = getattr(user_class, "options_error", None)
        if lacking is not None and lacking(settings):
            raise SettingsError(lacking(settings))
    check_prefix_free(settings)
    return settings
