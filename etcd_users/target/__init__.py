"""The cluster under load, shared by the features that act on it: ``cluster`` (``TargetCluster``: the endpoints given
or a local etcd started for the run, the start-up checks, the clean-up of the prefix) and ``action_table`` (the
disruptions' actions: what their grammar, the help, the runner and the docs read; pure)."""
