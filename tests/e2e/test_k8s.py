"""The cluster recipe (deploy/k8s/) and the single-host compose file: every manifest is valid against the Kubernetes
schemas (kubernetes-validate's bundled schemas, strict: an unknown field fails; no network), the pieces name each
other (labels, service, port, deployment), the probes ask the health endpoint, and compose's nginx configuration is
the one deploy/serve.py renders."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from deploy.serve import COOKIE, site_conf

ROOT = Path(__file__).resolve().parents[2]

K8S = ROOT / "deploy" / "k8s"
VERSION = "1.37.0"  # the newest schemas kubernetes-validate bundles
HEALTH = "/_stcore/health"


def manifests() -> dict[str, dict]:
    out = {}
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        assert len(docs) == 1, path
        out[docs[0]["kind"]] = docs[0]
    return out


def test_every_manifest_is_valid_and_listed():
    found = manifests()
    assert set(found) == {"Deployment", "Service", "Ingress", "HorizontalPodAutoscaler"}, set(found)
    for doc in found.values():
        kubernetes_validate.validate(doc, VERSION, strict=True)
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    assert listed == {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}, listed


def test_the_validation_can_fail():
    deployment = manifests()["Deployment"]
    bad = {**deployment, "spec": {**deployment["spec"], "replica": 2}}  # a misspelled field
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, VERSION, strict=True)
    bad = {**deployment, "spec": {**deployment["spec"], "replicas": "two"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, VERSION, strict=True)


def test_the_pieces_fit_together():
    m = manifests()
    dep, svc, ing, hpa = m["Deployment"], m["Service"], m["Ingress"], m["HorizontalPodAutoscaler"]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert svc["spec"]["selector"].items() <= labels.items()
    (container,) = dep["spec"]["template"]["spec"]["containers"]
    port_names = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert port_names == {"http": 8501}  # the Dockerfile's CMD
    assert {p["targetPort"] for p in svc["spec"]["ports"]} <= set(port_names)
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": HEALTH, "port": "http"}, probe
    res = container["resources"]
    assert set(res["requests"]) == set(res["limits"]) == {"cpu", "memory"}
    backend = ing["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend["name"] == svc["metadata"]["name"]
    assert backend["port"]["name"] in {p["name"] for p in svc["spec"]["ports"]}
    notes = ing["metadata"]["annotations"]
    assert ing["spec"]["ingressClassName"] == "nginx"
    assert notes["nginx.ingress.kubernetes.io/affinity"] == "cookie"
    assert notes["nginx.ingress.kubernetes.io/session-cookie-name"] == COOKIE
    for t in ("proxy-read-timeout", "proxy-send-timeout"):  # the websocket stays open while a student reads
        assert int(notes[f"nginx.ingress.kubernetes.io/{t}"]) >= 3600, t
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", dep["metadata"]["name"])
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    assert hpa["spec"]["minReplicas"] <= dep["spec"]["replicas"] <= hpa["spec"]["maxReplicas"]


def test_compose_file_parses_and_its_nginx_config_is_the_rendered_one():
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    app, nginx = compose["services"]["app"], compose["services"]["nginx"]
    assert (ROOT / app["build"]["context"].replace("..", ".") / app["build"]["dockerfile"]).exists()
    assert "STREAMLIT_SERVER_COOKIE_SECRET" in app["environment"]
    assert app["deploy"]["replicas"] >= 2
    assert nginx["depends_on"]["app"]["condition"] == "service_healthy"
    (volume,) = nginx["volumes"]
    source, target, mode = volume.split(":")
    assert target.startswith("/etc/nginx/conf.d/") and mode == "ro"
    rendered = site_conf("80", [8501], "/var/log/nginx/access.log", "app")
    assert (ROOT / "deploy" / source).read_text() == rendered, (
        "deploy/compose-nginx.conf is stale: python deploy/serve.py --print-site --replicas 1 --port 80 "
        "--first-port 8501 --upstream-host app --access-log /var/log/nginx/access.log > deploy/compose-nginx.conf"
    )
    assert "server app:8501 " in rendered and nginx["ports"] == ["8501:80"]
