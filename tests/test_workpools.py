"""The container deployments of prefect.yaml and the Kubernetes work pool's job template (workpools/kubernetes.json;
written, not yet run on a cluster): what can be checked without a cluster, cheaply.  The Docker work pool itself
runs in tests/flows/test_docker_pool.py."""
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
