"""The Kubernetes manifests of deploy/: valid YAML whose variables are real options and whose ports and names meet."""

import locust  # noqa: F401  (gevent patching before anything else loads: Locust's parser is read below)
from locust.argument_parser import get_parser

import argparse
import re
import socket
from pathlib import Path

import pytest
import yaml
from support import start_locust

from etcd_users import options as etcd_options
from etcd_users.options import settings_from_options
from shapes import options as shape_options

DEPLOY = Path(__file__).resolve().parent.parent / "deploy"
OPTIONS = {option.env_var: option for option in (*etcd_options.OPTIONS, *shape_options.OPTIONS)}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def locust_env_vars() -> set[str]:
    parser = get_parser()
    names = {action.env_var for action in parser._actions if getattr(action, "env_var", None)}
    # the user classes are positional; Locust reads them from this variable too (see `locust --help`)
    assert any("LOCUST_USER_CLASSES" in (action.help or "") for action in parser._actions)
    return {name for name in names if name.startswith("LOCUST_")} | {"LOCUST_USER_CLASSES"}


@pytest.fixture(scope="module")
def manifests() -> dict[tuple[str, str], dict]:
    """Every Kubernetes object of deploy/*.yaml, by (kind, name); kinds may repeat a name (the master Job)."""
    documents: dict[tuple[str, str], dict] = {}
    for path in sorted(DEPLOY.glob("*.yaml")):
        if path.name == "kustomization.yaml":  # kustomize's file, no object
            continue
        for document in yaml.safe_load_all(path.read_text()):
            assert document["apiVersion"] and document["kind"], path
            key = (document["kind"], document["metadata"]["name"])
            assert key not in documents, f"{path.name}: {key} defined twice"
            documents[key] = document
    return documents


def container(workload: dict) -> dict:
    [only] = workload["spec"]["template"]["spec"]["containers"]
    return only


def env_of(workload: dict) -> dict[str, dict]:
    return {entry["name"]: entry for entry in container(workload).get("env", [])}


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
    ours = {name for name in data if name.startswith(("ETCD_", "SHAPE_"))}
    assert {"ETCD_ENDPOINTS", "ETCD_TARGET", "ETCD_CONNS", "ETCD_SLA", "SHAPE_LADDER"} <= ours
    assert ours <= set(OPTIONS), ours - set(OPTIONS)
    assert set(data) - ours <= locust_env_vars(), set(data) - ours - locust_env_vars()
    assert not {name for name, option in OPTIONS.items() if getattr(option, "secret", False)} & set(data)
    # the commented-out ones too: uncommenting them must work
    commented = re.findall(r"^\s*#\s*((?:ETCD|SHAPE)_[A-Z_]+):", (DEPLOY / "configmap.yaml").read_text(), re.M)
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
    assert [gate.label for gate in settings.sla] == ["put p99", "Aggregated errors"]


def test_containers_name_only_real_variables(manifests):
    known = set(OPTIONS) | locust_env_vars()
    for key, workload in manifests.items():
        if key[0] in ("Deployment", "Job"):
            names = set(env_of(workload))
            assert names <= known, (key, names - known)
            assert container(workload)["envFrom"] == [{"configMapRef": {"name": "locust-etcd-options"}}], key


def test_workers_point_at_the_master_service_and_ports_meet(manifests):
    service = manifests[("Service", "locust-etcd-master")]
    ports = {port["name"]: port for port in service["spec"]["ports"]}
    assert {name: port["port"] for name, port in ports.items()} == {"master": 5557, "web": 8089}

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
        container_ports = {port["name"]: port["containerPort"] for port in container(master)["ports"]}
        assert int(env["LOCUST_MASTER_BIND_PORT"]["value"]) == container_ports[ports["master"]["targetPort"]]
    assert not service["spec"]["selector"].items() <= worker["spec"]["template"]["metadata"]["labels"].items()

    web_master = masters[0]
    web_port = {port["name"]: port["containerPort"] for port in container(web_master)["ports"]}["web"]
    assert int(env_of(web_master)["LOCUST_WEB_PORT"]["value"]) == web_port
    assert web_master["spec"]["replicas"] == 1
    assert manifests[("Job", "locust-etcd-master")]["spec"]["backoffLimit"] == 0
    assert env_of(masters[1])["LOCUST_EXPECT_WORKERS"]["value"] == str(worker["spec"]["replicas"])


def test_deployments_select_their_own_pods_and_share_one_image(manifests):
    images = set()
    for key, workload in manifests.items():
        if key[0] == "Deployment":
            assert (
                workload["spec"]["selector"]["matchLabels"].items()
                <= workload["spec"]["template"]["metadata"]["labels"].items()
            ), key
        if key[0] in ("Deployment", "Job"):
            images.add(container(workload)["image"])
    assert len(images) == 1


def test_the_dockerfile_copies_what_exists_and_runs_locust():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    repo = DEPLOY.parent
    sources = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("COPY ")]
    assert "requirements.txt" in sources and "locustfile.py" in sources
    for source in sources:
        assert (repo / source).exists(), source
    assert 'ENTRYPOINT ["locust"]' in dockerfile


def pod_environment(manifests, kind: str, name: str) -> dict[str, str]:
    """What the pod's container sees: the ConfigMap, then its own plain values (Kubernetes' order)."""
    environment = dict(manifests[("ConfigMap", "locust-etcd-options")]["data"])
    for entry in container(manifests[(kind, name)]).get("env", []):
        if "value" in entry:
            environment[entry["name"]] = entry["value"]
    return environment


@pytest.mark.slow
def test_the_job_and_worker_environments_run_a_test(manifests, etcd1, tmp_out):
    """The pods' variables alone drive a real run: only addresses, sizes and time are changed for this machine."""
    port = str(free_port())
    local = {
        "ETCD_ENDPOINTS": etcd1.endpoints[0],
        "ETCD_CONNS": "1",
        "ETCD_SLA": "put:p99<5s,errors<0.1%",
        "LOCUST_USERS": "2",
        "LOCUST_SPAWN_RATE": "2",
        "LOCUST_RUN_TIME": "3s",
        "LOCUST_EXPECT_WORKERS": "1",
        "LOCUST_MASTER_BIND_HOST": "127.0.0.1",
        "LOCUST_MASTER_BIND_PORT": port,
        "LOCUST_MASTER_NODE_HOST": "127.0.0.1",
        "LOCUST_MASTER_NODE_PORT": port,
    }
    master_env = {**pod_environment(manifests, "Job", "locust-etcd-master"), **local}
    worker_env = {**pod_environment(manifests, "Deployment", "locust-etcd-worker"), **local}
    with start_locust(env=master_env, log_dir=tmp_out) as master, start_locust(env=worker_env, log_dir=tmp_out):
        finished = master.finish(timeout=60)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert "1 workers connected" in finished.stderr
    assert "SLA put p99 < 5s: " in finished.stderr and "SLA Aggregated errors < 0.1%: 0.000% (0 of " in finished.stderr
    assert re.search(r"deleted \d+ keys under '/locust-etcd/'", finished.stderr)  # ETCD_CLEANUP=true
