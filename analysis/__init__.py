"""``python -m analysis PREFIX …`` in a clone of the repository; the analysis lives in ``etcd_users.analysis``
(``python -m etcd_users.analysis`` where the tool is installed)."""
