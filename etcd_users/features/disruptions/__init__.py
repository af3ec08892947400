"""Disruptions during a run (``--etcd-disrupt``): the schedule's grammar, the runner that acts on the members, and
the cost of each disruption to the requests."""
