"""The cluster recipe (deploy/k8s/) and the single-host compose file: every manifest is valid against the Kubernetes
schemas (kubernetes-validate's bundled schemas, strict: an unknown field fails; no network), the pieces name each
other (labels, service, port, deployment, the database's service and secret), the probes ask the health endpoint,
and compose's nginx configuration is the one deploy/serve.py renders."""

from __future__ import annotations

import re
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from deploy.serve import COOKIE, site_conf

ROOT = Path(__file__).resolve().parents[2]

K8S = ROOT / "deploy" / "k8s"
VERSION = "1.37.0"  # the newest schemas kubernetes-validate bundles
HEALTH = "/_stcore/health"


SECRET = "decoder-lens"
MIGRATE = ["python", "-m", "classroom", "migrate"]


def manifests() -> dict[tuple[str, str], dict]:
    """Every manifest by (kind, name)."""
    out = {}
    for path in sorted(K8S.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        assert len(docs) == 1, path
        out[docs[0]["kind"], docs[0]["metadata"]["name"]] = docs[0]
    return out


def secret_keys(doc) -> set[str]:
    """The keys of the secret ``decoder-lens`` that a manifest reads."""
    if isinstance(doc, dict):
        ref = doc.get("secretKeyRef")
        found = {ref["key"]} if ref and ref["name"] == SECRET else set()
        return found.union(*(secret_keys(v) for v in doc.values()))
    if isinstance(doc, list):
        return set().union(*(secret_keys(v) for v in doc))
    return set()


def env_of(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


def test_every_manifest_is_valid_and_listed():
    found = manifests()
    assert set(found) == {
        ("Deployment", "decoder-lens"),
        ("Service", "decoder-lens"),
        ("Ingress", "decoder-lens"),
        ("Ingress", "decoder-lens-class"),
        ("HorizontalPodAutoscaler", "decoder-lens"),
        ("StatefulSet", "decoder-lens-db"),
        ("Service", "decoder-lens-db"),
    }, set(found)
    for doc in found.values():
        kubernetes_validate.validate(doc, VERSION, strict=True)
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    assert listed == {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}, listed


def test_the_validation_can_fail():
    deployment = manifests()["Deployment", "decoder-lens"]
    bad = {**deployment, "spec": {**deployment["spec"], "replica": 2}}  # a misspelled field
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, VERSION, strict=True)
    bad = {**deployment, "spec": {**deployment["spec"], "replicas": "two"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, VERSION, strict=True)


def test_the_pieces_fit_together():
    m = manifests()
    name = "decoder-lens"
    dep, svc, ing, hpa = (m[k, name] for k in ("Deployment", "Service", "Ingress", "HorizontalPodAutoscaler"))
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


def test_the_database_is_one_volume_backed_pod_the_replicas_reach_by_the_secret():
    m = manifests()
    dep, db, db_svc, app_svc = (
        m["Deployment", "decoder-lens"],
        m["StatefulSet", "decoder-lens-db"],
        m["Service", "decoder-lens-db"],
        m["Service", "decoder-lens"],
    )
    # the replicas: DATABASE_URL from the secret, migrated by an init container before the app starts
    (app,) = dep["spec"]["template"]["spec"]["containers"]
    (init,) = dep["spec"]["template"]["spec"]["initContainers"]
    for c in (app, init):
        assert env_of(c)["DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {"name": SECRET, "key": "database-url"}
    assert init["command"] == MIGRATE and init["image"] == app["image"]
    # the database: one pod, its data on a claim of its own, reached through its headless service by port name
    assert db["spec"]["replicas"] == 1 and db["spec"]["serviceName"] == db_svc["metadata"]["name"]
    (claim,) = db["spec"]["volumeClaimTemplates"]
    (pg,) = db["spec"]["template"]["spec"]["containers"]
    (mount,) = pg["volumeMounts"]
    assert mount["name"] == claim["metadata"]["name"] and claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert env_of(pg)["PGDATA"]["value"].startswith(mount["mountPath"] + "/")  # not the volume's root
    assert env_of(pg)["POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"] == {"name": SECRET, "key": "db-password"}
    labels = db["spec"]["template"]["metadata"]["labels"]
    assert db["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert db_svc["spec"]["selector"].items() <= labels.items() and db_svc["spec"]["clusterIP"] == "None"
    assert not app_svc["spec"]["selector"].items() <= labels.items()  # the app's service never picks the database
    (port,) = db_svc["spec"]["ports"]
    assert port["port"] == 5432 and port["targetPort"] in {p["name"] for p in pg["ports"]}
    for probe in ("readinessProbe", "livenessProbe"):
        assert pg[probe]["exec"]["command"][0] == "pg_isready", probe
    # the secret the kustomization's recipe creates holds every key the manifests read, and its URL names the
    # database's service, port, user and database
    recipe = (K8S / "kustomization.yaml").read_text()
    made = set(re.findall(r"--from-literal=([a-z-]+)=", recipe))
    assert secret_keys(list(m.values())) == made == {"cookie-secret", "db-password", "database-url"}, made
    (url,) = re.findall(r'database-url="([^"]+)"', recipe)
    env = env_of(pg)
    want = f"postgresql://{env['POSTGRES_USER']['value']}:$pw@{db_svc['metadata']['name']}:5432/"
    assert url == want + env["POSTGRES_DB"]["value"], url


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


def test_compose_shares_one_postgresql_migrated_before_the_replicas_start():
    services = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())["services"]
    app, db, migrate = services["app"], services["db"], services["migrate"]
    assert db["image"].startswith("postgres:") and db["healthcheck"]["test"][1] == "pg_isready"
    (volume,) = db["volumes"]
    assert volume.split(":")[1] == "/var/lib/postgresql/data"
    env = db["environment"]
    url = f"postgresql://{env['POSTGRES_USER']}:${{DECODER_LENS_DB_PASSWORD}}@db:5432/{env['POSTGRES_DB']}"
    assert "DECODER_LENS_DB_PASSWORD" in env["POSTGRES_PASSWORD"]
    assert app["environment"]["DATABASE_URL"] == migrate["environment"]["DATABASE_URL"] == url
    assert migrate["command"] == MIGRATE and migrate["image"] == app["image"] and migrate["build"] == app["build"]
    assert migrate["depends_on"]["db"]["condition"] == "service_healthy"
    assert app["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
