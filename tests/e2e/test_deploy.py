"""The deployment files: the nginx configuration is what deploy/serve.py renders and nginx accepts it; the Dockerfile
installs the pinned CPU torch and runs the app as the README says. (benchmarks/replicas.py, run by
test_bench_smoke.py, drives browsers through it.) A missing nginx is a failure, never a skip: .ci/run installs it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from deploy.serve import COOKIE, main_conf, site_conf

ROOT = Path(__file__).resolve().parents[2]


def nginx() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if not found:
        pytest.fail("nginx is missing: install Debian's nginx (apt-get install nginx); .ci/run does this")
    return found


def test_committed_site_config_is_the_rendered_one():
    rendered = site_conf("80", [8511, 8512, 8513, 8514])
    assert (ROOT / "deploy" / "nginx.conf").read_text() == rendered, (
        "deploy/nginx.conf is stale: python deploy/serve.py --print-site --replicas 4 --port 80 > deploy/nginx.conf"
    )
    for needed in (
        "hash $dl_route consistent;",
        f'"{COOKIE}=$request_id; Path=/; HttpOnly; SameSite=Lax"',
        "proxy_http_version 1.1;",
        "proxy_set_header Upgrade $http_upgrade;",
        "proxy_set_header Connection $dl_connection;",
        "proxy_read_timeout 1d;",
    ):
        assert needed in rendered, needed
    assert "ip_hash" not in rendered  # every browser behind one address would land on one replica


def test_nginx_accepts_both_configurations(tmp_path):
    site = tmp_path / "site.conf"
    site.write_text(site_conf("127.0.0.1:18080", [18511, 18512], access_log=str(tmp_path / "access.log")))
    wrapper = tmp_path / "system.conf"  # as a system nginx includes a site: inside http {}
    wrapper.write_text(
        f"pid {tmp_path}/w.pid;\nerror_log {tmp_path}/w.log;\nevents {{}}\nhttp {{\n    include {site};\n}}\n"
    )
    (tmp_path / "tmp").mkdir()
    standalone = tmp_path / "nginx.conf"
    standalone.write_text(main_conf(tmp_path, site.read_text()))
    for conf in (wrapper, standalone):
        proc = subprocess.run([nginx(), "-t", "-p", str(tmp_path), "-c", str(conf)], capture_output=True, text=True)
        assert proc.returncode == 0, f"{conf.name}:\n{proc.stderr}"


def test_dockerfile_pins_cpu_torch_and_runs_the_app():
    text = (ROOT / "deploy" / "Dockerfile").read_text()
    assert text.startswith("#") and "\nFROM python:3.11-slim\n" in text
    assert "--index-url https://download.pytorch.org/whl/cpu torch==2.13.0" in text
    assert "torch==2.13.0\n" in (ROOT / "requirements.txt").read_text()  # the pin the image must meet
    assert (
        'CMD ["streamlit", "run", "app.py", "--server.port", "8501", "--server.address", "0.0.0.0", '
        '"--server.headless", "true"]'
    ) in text
