"""The Kubernetes manifests of deploy/: valid YAML whose variables are real options and whose ports and names meet.
A real run driven by the pods' variables alone is ``tests/e2e/test_deploy.py``."""

import locust  # noqa: F401  (gevent patching before anything else loads: Locust's parser is read below)
from locust.argument_parser import get_parser

import argparse
import re

import pytest
import yaml
from support import DEPLOY, deploy_manifests, pod_container

from etcd_users.core import features as etcd_options
from etcd_users.features.shapes import options as shape_options
from etcd_users.settings import settings_from_options

OPTIONS = {option.env_var: option for option in (*etcd_options.OPTIONS, *shape_options.OPTIONS)}


def locust_env_vars() -> set[str]:
    parser = get_parser()
    names = {action.env_var for action in parser._actions if getattr(action, "env_var", None)}
    # the user classes are positional; Locust reads them from this variable too (see `locust --help`)
    assert any("LOCUST_USER_CLASSES" in (action.help or "") for action in parser._actions)
    return {name for name in names if name.startswith("LOCUST_")} | {"LOCUST_USER_CLASSES"}


@pytest.fixture(scope="module")
def manifests() -> dict[tuple[str, str], dict]:
    return deploy_manifests()


def env_of(workload: dict) -> dict[str, dict]:
    return {entry["name"]: entry for entry in pod_container(workload).get("env", [])}


def test_every_file_parses_and_kustomize_lists_real_files(manifests):
    assert set(manifests) == {
        ("ConfigMap", "locust-etcd-options"),
        ("Service", "locust-etcd-master"),
        ("Deployment", "locust-etcd-master"),
        ("Deployment", "locust-etcd-worker"),
        ("Job", "locust-etcd-master"),
    }
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    for resource in kustomization["resources"]:
        assert (DEPLOY / resource).is_file(), resource


def test_configmap_variables_are_real_options_with_valid_values(manifests):
    data = manifests[("ConfigMap", "locust-etcd-options")]["data"]
    assert all(isinstance(value, str) for value in data.values())  # Kubernetes takes strings only
    ours = {name for name in data if name.startswith(("LOCUST_ETCD_", "LOCUST_SHAPE_"))}
    assert {
        "LOCUST_ETCD_ENDPOINTS",
        "LOCUST_ETCD_TARGET",
        "LOCUST_ETCD_CONNS",
        "LOCUST_ETCD_SLA",
        "LOCUST_SHAPE_LADDER",
    } <= ours
    assert ours <= set(OPTIONS), ours - set(OPTIONS)
    assert set(data) - ours <= locust_env_vars(), set(data) - ours - locust_env_vars()
    assert not {name for name, option in OPTIONS.items() if getattr(option, "secret", False)} & set(data)
    # the commented-out ones too: uncommenting them must work
    commented = re.findall(r"^\s*#\s*(LOCUST_(?:ETCD|SHAPE)_[A-Z_]+):", (DEPLOY / "configmap.yaml").read_text(), re.M)
    assert commented and set(commented) <= set(OPTIONS), commented

    # the values as the options would read them
    namespace = argparse.Namespace(**{option.dest: option.default for option in etcd_options.OPTIONS})
    for name in ours & {option.env_var for option in etcd_options.OPTIONS}:
        option = OPTIONS[name]
        if isinstance(option.default, bool):
            assert data[name] in ("true", "false"), name
            value = data[name] == "true"
        else:
            value = type(option.default)(data[name])
        setattr(namespace, option.dest, value)
    settings = settings_from_options(namespace)
    assert len(settings.endpoints) == 3 and settings.target == "leader"
    assert [gate.label for gate in settings.gates.sla] == ["put p99", "Aggregated errors"]


def test_containers_name_only_real_variables(manifests):
    known = set(OPTIONS) | locust_env_vars()
    for key, workload in manifests.items():
        if key[0] in ("Deployment", "Job"):
            names = set(env_of(workload))
            assert names <= known, (key, names - known)
            assert pod_container(workload)["envFrom"] == [{"configMapRef": {"name": "locust-etcd-options"}}], key


def test_workers_point_at_the_master_service_and_ports_meet(manifests):
    service = manifests[("Service", "locust-etcd-master")]
    ports = {port["name"]: port for port in service["spec"]["ports"]}
    assert {name: port["port"] for name, port in ports.items()} == {"master": 5557, "web": 8089, "metrics": 9647}

    worker = manifests[("Deployment", "locust-etcd-worker")]
    env = env_of(worker)
    assert env["LOCUST_MODE_WORKER"]["value"] == "true"
    assert env["LOCUST_MASTER_NODE_HOST"]["value"] == service["metadata"]["name"]
    assert int(env["LOCUST_MASTER_NODE_PORT"]["value"]) == ports["master"]["port"]
    assert worker["spec"]["replicas"] >= 1

    masters = [manifests[("Deployment", "locust-etcd-master")], manifests[("Job", "locust-etcd-master")]]
    for master in masters:
        labels = master["spec"]["template"]["metadata"]["labels"]
        assert service["spec"]["selector"].items() <= labels.items(), master["kind"]
        env = env_of(master)
        assert env["LOCUST_MODE_MASTER"]["value"] == "true"
        container_ports = {port["name"]: port["containerPort"] for port in pod_container(master)["ports"]}
        assert int(env["LOCUST_MASTER_BIND_PORT"]["value"]) == container_ports[ports["master"]["targetPort"]]
    assert not service["spec"]["selector"].items() <= worker["spec"]["template"]["metadata"]["labels"].items()

    web_master = masters[0]
    web_port = {port["name"]: port["containerPort"] for port in pod_container(web_master)["ports"]}["web"]
    assert int(env_of(web_master)["LOCUST_WEB_PORT"]["value"]) == web_port
    assert web_master["spec"]["replicas"] == 1
    assert manifests[("Job", "locust-etcd-master")]["spec"]["backoffLimit"] == 0
    assert env_of(masters[1])["LOCUST_EXPECT_WORKERS"]["value"] == str(worker["spec"]["replicas"])


def test_the_masters_pods_are_scraped_on_the_exporters_port_and_the_workers_not(manifests):
    """Prometheus' kubernetes-pods job reads the pods' annotations: the master's port is LOCUST_ETCD_PROMETHEUS_PORT."""
    port = manifests[("ConfigMap", "locust-etcd-options")]["data"]["LOCUST_ETCD_PROMETHEUS_PORT"]
    assert 0 < int(port) < 65536
    service_ports = {entry["name"]: entry for entry in manifests[("Service", "locust-etcd-master")]["spec"]["ports"]}
    assert service_ports["metrics"]["port"] == int(port) and service_ports["metrics"]["targetPort"] == "metrics"
    # pods only: a Service annotated too would be scraped again by a kubernetes-service-endpoints job
    assert "annotations" not in manifests[("Service", "locust-etcd-master")]["metadata"]
    for key in (("Deployment", "locust-etcd-master"), ("Job", "locust-etcd-master")):
        annotations = manifests[key]["spec"]["template"]["metadata"]["annotations"]
        assert annotations == {
            "prometheus.io/scrape": "true",
            "prometheus.io/port": port,
            "prometheus.io/path": "/metrics",
        }
        container_ports = {entry["name"]: entry["containerPort"] for entry in pod_container(manifests[key])["ports"]}
        assert container_ports["metrics"] == int(port), key
    worker = manifests[("Deployment", "locust-etcd-worker")]["spec"]["template"]["metadata"]
    assert "prometheus.io/scrape" not in worker.get("annotations", {})  # workers serve nothing: the master merges


def test_deployments_select_their_own_pods_and_share_one_image(manifests):
    images = set()
    for key, workload in manifests.items():
        if key[0] == "Deployment":
            assert (
                workload["spec"]["selector"]["matchLabels"].items()
                <= workload["spec"]["template"]["metadata"]["labels"].items()
            ), key
        if key[0] in ("Deployment", "Job"):
            images.add(pod_container(workload)["image"])
    assert len(images) == 1


def test_the_dockerfile_copies_what_exists_and_runs_locust():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    repo = DEPLOY.parent
    sources = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("COPY ")]
    assert "requirements.txt" in sources and "locustfile.py" in sources
    for source in sources:
        assert (repo / source).exists(), source
    assert 'ENTRYPOINT ["locust"]' in dockerfile
