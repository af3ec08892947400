"""The target cluster's hooks: the run's settings checked at init (bad input ends the process with one line) and
resolved at each run's start (the web UI's form may bring others), the endpoints shown as Locust's host, and after
the run the keys under the prefix deleted (``--etcd-cleanup``) and the local etcd stopped."""

import locust  # noqa: F401  (gevent's monkey patching must come first)

import logging

import gevent

from etcd_users import open_files
from etcd_users.core.feature_hooks import RUN_LOGGER, FeatureHooks
from etcd_users.core.features import has_etcd_options
from etcd_users.core.run_context import run_context
from etcd_users.features.target_cluster.checks import checked_settings
from etcd_users.local import ClusterError
from etcd_users.session import ProcessSession
from etcd_users.settings import EtcdSettings, SettingsError, settings_from_options
from etcd_users.target.cluster import TargetCluster, delete_prefix
from etcd_users.transport import bridge
from etcd_users.transport.errors import EndpointError

logger = logging.getLogger(RUN_LOGGER)


class TargetClusterHooks(FeatureHooks):
    def __init__(self, tool) -> None:
        super().__init__(tool)
        self.target = tool.get(TargetCluster)
        self.shown_host: str | None = None  # the endpoints this process shows as Locust's host
        self.open_files = -1  # this process's open-file limit, raised at init (-1: not yet)

    def on_init(self, environment, runner=None, web_ui=None, **_kwargs) -> None:
        """Check the options and the cluster before anything runs; bad input ends the process with one line."""
        self.open_files = open_files.raise_limit()  # every process: a worker's, a forked one's, the master's
        if not has_etcd_options(environment) or run_context(environment).role.is_worker:
            return  # workers take their options from the master when a run starts
        try:
            self.tool.run_settings = checked_settings(environment, self.target, self.open_files)
        except (SettingsError, EndpointError, ClusterError) as error:
            self.tool.fail(str(error))
        self._show_endpoints_as_host(environment, self.tool.run_settings)

    def on_test_start(self, environment, **_kwargs) -> None:
        """A new run may come with new options (the web UI's form, or the master's): reconnect with them."""
        if not has_etcd_options(environment):
            return
        context = run_context(environment)
        is_worker = context.role.is_worker
        self.tool.ran = self.tool.ran or (environment.runner is not None and not is_worker)
        try:  # the master resolves the endpoints before it sends the options to the workers
            options = environment.parsed_options
            settings = settings_from_options(options) if is_worker else self.target.settings(options)
        except (SettingsError, ClusterError) as error:
            logger.error("locust-etcd: error: %s", error)
            if environment.runner is not None:
                gevent.spawn(environment.runner.stop)
            return
        if is_worker:  # the master checked its own limit; a worker on another machine may have a lower one
            too_many = open_files.connections_error(settings.conns, len(settings.endpoints), self.open_files)
            if too_many:
                logger.error("locust-etcd: error: %s", too_many)
        else:
            self.tool.run_settings = settings
            self._show_endpoints_as_host(environment, settings)
            self.tool.start_run(environment, settings)  # before the key space is written: the monitoring watches it
        context.get(ProcessSession).drop_if_changed(settings)

    def on_cleanup(self, failed: bool) -> None:
        environment, settings = self.tool.environment, self.tool.run_settings
        if not failed:
            if environment is not None:
                run_context(environment).get(ProcessSession).close()
            if settings is not None and settings.cleanup:
                try:
                    delete_prefix(settings)
                except (EndpointError, SettingsError) as error:
                    logger.error("locust-etcd: could not delete the keys under the prefix: %s", error)
        bridge.close_bridge()
        self.target.stop_local()

    def _show_endpoints_as_host(self, environment, settings: EtcdSettings) -> None:
        """Locust's header shows the host: the endpoints the run loads, unless a host of one's own was given."""
        host = ",".join(endpoint.url for endpoint in settings.endpoints)
        if not environment.host or environment.host == self.shown_host:
            environment.host = self.shown_host = host
