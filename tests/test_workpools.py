"""The container deployments of prefect.yaml, the Kubernetes work pool's job template (workpools/kubernetes.json;
written, not yet run on a cluster) and the Docker work pool's (workpools/docker.json: its GPUs, not yet run on a GPU
host): what can be checked without a cluster or a GPU, cheaply.  The Docker work pool itself runs in
tests/flows/test_docker_pool.py."""
from __future__ import annotations

import json

import pytest
import yaml

from tests.conftest import ROOT
from tests.podman import IMAGE, IMAGE_UID

K8S_TEMPLATE = ROOT / "workpools" / "kubernetes.json"
CACHE_MOUNT = "/cache"            # the Containerfile's CHATTTS_RENDER_CACHE


def deployments() -> dict[str, dict]:
    return {d["name"]: d for d in yaml.safe_load((ROOT / "prefect.yaml").read_text())["deployments"]}


def defaults(schema: dict) -> dict:
    return {k: v["default"] for k, v in schema["properties"].items() if "default" in v}


def test_the_kubernetes_template_is_one_prefect_accepts_and_declares_what_it_uses():
    """Prefect's own check of a base job template (what `work-pool create --base-job-template` runs), a valid JSON
    schema of variables whose defaults fit it, and the deployment's job variables among them."""
    from jsonschema import Draft202012Validator
    from prefect.server.schemas.actions import validate_base_job_template

    template = json.loads(K8S_TEMPLATE.read_text())
    validate_base_job_template(template)
    schema = template["variables"]
    Draft202012Validator.check_schema(schema)
    assert all("type" in p for p in schema["properties"].values())
    job_variables = deployments()["kubernetes"]["work_pool"]["job_variables"]
    assert set(job_variables) <= set(schema["properties"])
    Draft202012Validator(schema).validate({**defaults(schema), **job_variables})


def test_the_kubernetes_job_runs_the_image_on_a_gpu_node_as_its_user_with_the_cache_and_the_store():
    """The template rendered as the worker renders it (Prefect's templating) with its defaults and the
    deployment's job variables: the pod a flow run gets."""
    from prefect.utilities.templating import apply_values

    template = json.loads(K8S_TEMPLATE.read_text())
    dep = deployments()["kubernetes"]
    values = {**defaults(template["variables"]), **dep["work_pool"]["job_variables"],
              "command": "prefect flow-run execute", "env": {}, "labels": {}, "name": "render"}
    job = apply_values(template["job_configuration"], values)["job_manifest"]
    pod = job["spec"]["template"]["spec"]
    [container] = pod["containers"]
    assert container["image"] == dep["work_pool"]["job_variables"]["image"] and dep["parameters"]["device"] == "cuda"
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1 and pod["nodeSelector"] and pod["tolerations"]
    assert pod["securityContext"]["runAsUser"] == IMAGE_UID == pod["securityContext"]["fsGroup"]
    [mount] = container["volumeMounts"]
    [volume] = pod["volumes"]
    assert mount == {"name": volume["name"], "mountPath": CACHE_MOUNT}
    assert volume["persistentVolumeClaim"]["claimName"] and container["envFrom"][0]["secretRef"]["name"]
    assert pod["restartPolicy"] == "Never" and job["spec"]["backoffLimit"] == 0


def test_the_docker_deployment_runs_the_local_image_with_its_job_variables():
    """Pull policy Never on a localhost/ image (nothing can be pulled), every job variable one of the Docker
    worker's, the code the image's (a module entrypoint, a pull step into the image)."""
    worker = pytest.importorskip("prefect_docker.worker", reason="the docker extra (prefect-docker) is not installed")
    from jsonschema import Draft202012Validator

    schema = worker.DockerWorker.get_default_base_job_template()["variables"]
    dep = deployments()["container"]
    job_variables = dep["work_pool"]["job_variables"]
    assert set(job_variables) <= set(schema["properties"])
    Draft202012Validator(schema).validate(job_variables)
    assert job_variables["image"] == IMAGE and job_variables["image_pull_policy"] == "Never"
    assert f"chattts-cache:{CACHE_MOUNT}" in job_variables["volumes"]
    assert ":" not in dep["entrypoint"] and dep["pull"][0]["prefect.deployments.steps.set_working_directory"]
    assert deployments()["kubernetes"]["entrypoint"] == dep["entrypoint"]


DOCKER_TEMPLATE = ROOT / "workpools" / "docker.json"
ONE_GPU = {"Driver": "nvidia", "Count": 1, "DeviceIDs": [], "Capabilities": [["gpu"]], "Options": {}}


def docker_template_or_skip() -> tuple[dict, object]:
    worker = pytest.importorskip("prefect_docker.worker", reason="the docker extra (prefect-docker) is not installed")
    return json.loads(DOCKER_TEMPLATE.read_text()), worker


def test_the_docker_template_is_prefect_dockers_own_with_device_requests():
    """workpools/docker.json is prefect-docker's default base job template but for one variable: device_requests (none
    by default) in place of the free-form container_create_kwargs, which it fills; Prefect's own check accepts it and
    both container deployments' job variables are among its variables and fit their schemas."""
    from jsonschema import Draft202012Validator
    from prefect.server.schemas.actions import validate_base_job_template

    template, worker = docker_template_or_skip()
    validate_base_job_template(template)
    Draft202012Validator.check_schema(template["variables"])
    default = worker.DockerWorker.get_default_base_job_template()
    props, default_props = template["variables"]["properties"], default["variables"]["properties"]
    assert set(props) == set(default_props) - {"container_create_kwargs"} | {"device_requests"}
    assert all(props[k] == v for k, v in default_props.items() if k in props)
    config, default_config = template["job_configuration"], default["job_configuration"]
    assert config.pop("container_create_kwargs") == {"device_requests": "{{ device_requests }}"}
    assert config == {k: v for k, v in default_config.items() if k != "container_create_kwargs"}
    assert props["device_requests"]["default"] == []
    validator = Draft202012Validator(template["variables"])
    for name in ("container", "container-cuda"):
        job_variables = deployments()[name]["work_pool"]["job_variables"]
        assert set(job_variables) <= set(props), name
        validator.validate({**defaults(template["variables"]), **job_variables})
    cuda = deployments()["container-cuda"]
    assert cuda["parameters"]["device"] == "cuda" and cuda["work_pool"]["job_variables"]["image"].endswith(":cuda")
    assert cuda["work_pool"]["name"] != deployments()["container"]["work_pool"]["name"]   # GPU hosts' own pool
    for bad in ([{"driver": "nvidia", "count": "all"}], [{"driver": "nvidia", "count": 1, "device_ids": ["0"]}],
                [{"driver": "nvidia", "gpus": 1}], {"driver": "nvidia"}):
        assert list(validator.iter_errors({"device_requests": bad})), bad


@pytest.mark.parametrize("deployment, expected", [("container-cuda", [ONE_GPU]), ("container", [])])
def test_device_requests_reach_the_container_create_call(deployment, expected):
    """The deployment's job variables through the template as the worker renders them (Prefect's templating into
    prefect-docker's job configuration), the worker's container settings, and docker-py's container create: the
    Docker Engine API body it sends holds HostConfig.DeviceRequests (what `docker run --gpus 1` sends)."""
    import asyncio
    import types

    import docker

    template, worker = docker_template_or_skip()
    values = {**deployments()[deployment]["work_pool"]["job_variables"], "command": "prefect flow-run execute"}
    no_api = types.SimpleNamespace()       # the template names no blocks or Prefect variables: the API is never asked
    config = asyncio.run(worker.DockerWorkerJobConfiguration.from_template_and_values(template, values, client=no_api))
    assert config.container_create_kwargs == {"device_requests": values.get("device_requests", [])}
    client = docker.DockerClient(base_url="unix:///nonexistent/docker.sock", version="1.43")   # never connected
    client.api.version = lambda *a, **k: {"Version": "24.0.7", "ApiVersion": "1.43"}
    sent: list[dict] = []

    def create_container_from_config(config, name, platform=None):
        sent.append(config)
        raise docker.errors.APIError("captured")             # the body is what matters; nothing is created

    client.api.create_container_from_config = create_container_from_config
    settings = worker.DockerWorker(work_pool_name="chattts-docker")._build_container_settings(client, config)
    with pytest.raises(docker.errors.APIError, match="captured"):
        client.containers.create(**settings)
    [body] = sent
    assert body["Image"] == values["image"] and body["HostConfig"]["NetworkMode"] == "host"
    assert body["HostConfig"]["DeviceRequests"] == expected
