"""A read-heavy mix (4 serializable reads per put) whose run is judged by SLA gates set in this file.

    locust -f examples/read_write_mix_with_gates.py --headless -u 8 -r 8 -t 10s --csv out/mix

When the run ends each gate is printed with its measured value and PASS or FAIL (``SLA put p99 < 500ms: 4.100ms
PASS``), and a failed gate makes the exit code 3, which a CI job can fail on. ``--etcd-sla`` on the command line (or
``LOCUST_ETCD_SLA``) replaces the file's gates, e.g. ``--etcd-sla 'put:p99<1us'`` to see one fail; the file also
sets a smaller key space (``--etcd-key-space-size 1000``).
"""

from locust import events, task

import random

from etcd_users import EtcdUser

GATES = "put:p99<500ms,range/serializable:p99<500ms,errors<1%"
READS_PER_WRITE = 4


@events.init_command_line_parser.add_listener
def _defaults(parser, **_kwargs) -> None:
    # the --etcd-* options are declared by then (importing etcd_users added them first): these are only defaults;
    # 1,000 keys: the reads' key space is written before the run starts, and 10,000 take seconds to write
    parser.set_defaults(etcd_sla=GATES, etcd_key_space_size=1000)


class ReadWriteMixUser(EtcdUser):
    """Serializable reads of the key space and puts to it, ``READS_PER_WRITE`` to one."""

    reads_key_space = True  # the key space is written before the run's clock starts, not counted

    @task
    def mix(self) -> None:
        self.etcd.session.ensure_key_space()  # nothing to do once written (a worker checks it is there)
        etcd, keys, draw = self.etcd, self.etcd.keys, random.Random().random
        share_of_writes = 1 / (READS_PER_WRITE + 1)

        def one() -> None:
            if draw() < share_of_writes:
                etcd.put(keys.next_key(), keys.value)
            else:
                etcd.range(keys.next_key(), serializable=True)

        self.repeat(one)
