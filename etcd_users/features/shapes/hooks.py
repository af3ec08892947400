"""The load shapes' hooks: what a shape's live verdicts need from the run (the exact latencies, the members' rows,
the members' side of a breach), its own options checked where the tool's are not, and its verdict on the run."""

from etcd_users.core.feature_hooks import FeatureHooks
from etcd_users.core.features import has_etcd_options
from etcd_users.core.run_context import run_context
from etcd_users.judging.judged import check_on_init, judged_shape, judged_shapes
from etcd_users.latency.recorder import LatencyRecorder
from etcd_users.members.seen import MembersSeen


class ShapeHooks(FeatureHooks):
    def on_init(self, environment, runner=None, web_ui=None, **_kwargs) -> None:
        context = run_context(environment)
        recorder = self.tool.get(LatencyRecorder)
        for shape in judged_shapes(environment):
            shape.recorder, shape.on_breach = recorder, lambda why: context.get(MembersSeen).on_breach(why)
            shape.member_rows = lambda: context.get(MembersSeen).member_rows
        if not has_etcd_options(environment) or context.role.is_worker:
            check_on_init(environment)  # a shape's own options, without the tool's etcd ones (not on workers)

    def exit_verdict(self, environment):
        shape = judged_shape(environment)
        return shape.exit_verdict() if shape is not None else None
