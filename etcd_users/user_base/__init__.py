"""What a workload is built on, for the ready workloads and a feature's own alike: the base user ``EtcdUser``
(``user``) and its instrumented client, ``self.etcd`` (``client``). A layer every feature may import: it knows no
feature (the ready workloads' loop engine is ``etcd_users.features.engine``, chosen in ``etcd_users.users``)."""
