"""Serve a class: K ``streamlit run app.py`` replicas on localhost ports and nginx in front, in one command.

    python deploy/serve.py [--replicas K] [--port 8501] [--first-port 8511] [--model DIR] [--listen 0.0.0.0]
    python deploy/serve.py --print-site [--replicas K] [--port 80] [--first-port 8511] > /etc/nginx/sites-available/…

nginx balances the browsers over the replicas and keeps each browser on one replica (a Streamlit session lives in
the memory of the process that opened it): on a browser's first request nginx draws a random id ($request_id),
hashes the request by it and sets it as the cookie ``dl_route``; every later request of that browser (page,
static files, the websocket /_stcore/stream) carries the cookie and goes by the same hash to the same replica.
Browsers behind one address (a school's NAT, or all on 127.0.0.1) are spread all the same, unlike ip_hash.
The hash is consistent: when a replica stops answering, nginx sends its browsers to the next one on the ring,
where the app opens the same view from the URL (every choice is in it), and adding a replica moves only about
1/K of the browsers. This launcher restarts a replica that exits, and stops everything on Ctrl+C or SIGTERM.

The replicas listen on 127.0.0.1 only and share one cookie secret (Streamlit's XSRF cookie stays valid on another
replica). nginx runs as this user with every path (pid, logs, temporary files) in a run folder (``--run-dir``,
default a new temporary folder), so no root and no system configuration is needed; ``--print-site`` prints the
same configuration for a system nginx instead (Debian: /etc/nginx/sites-available/, then link it into
sites-enabled/ and ``systemctl reload nginx``). Debian's nginx: ``apt-get install nginx``.
"""

from __future__ import annotations

import argparse
import grp
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parents[1]
ENV_MODEL = "DECODER_LENS_MODEL"  # as model.io.checkpoint.ENV_MODEL (this launcher imports nothing of the app)
COOKIE = "dl_route"
LOG_FORMAT = "decoder_lens"
SYSTEM_ACCESS_LOG = "/var/log/nginx/decoder-lens.access.log"


def site_conf(listen: str, ports: list[int], access_log: str = SYSTEM_ACCESS_LOG, host: str = "127.0.0.1") -> str:
    """The http-level nginx configuration: the sticky map, the upstream of the replicas, the server in front."""
    servers = "\n".join(f"    server {host}:{p} max_fails=1 fail_timeout=5s;" for p in ports)
    return f"""# Decoder Lens: {len(ports)} Streamlit replicas behind nginx, each browser kept on one replica.
# Rendered by deploy/serve.py (python deploy/serve.py --print-site --replicas K --port P --first-port F).
# Debian: save as /etc/nginx/sites-available/decoder-lens, link it into sites-enabled/, remove
# sites-enabled/default (it answers on port 80 too) or put the host's name in server_name, then
# nginx -t && systemctl reload nginx. The replicas: deploy/decoder-lens@.service, one per port below.

# A browser without the {COOKIE} cookie gets a random id (this request's $request_id), hashed and set as its
# cookie below; with the cookie, the same id, so the same replica for the page, its files and its websocket.
map $cookie_{COOKIE} $dl_route {{
    ""      $request_id;
    default $cookie_{COOKIE};
}}
map $cookie_{COOKIE} $dl_route_cookie {{
    ""      "{COOKIE}=$request_id; Path=/; HttpOnly; SameSite=Lax";
    default "";
}}
map $http_upgrade $dl_connection {{
    default upgrade;
    ""      close;
}}
# The path only ($uri), never the query string: it holds the sentences students type, and links made before the
# teacher's secret moved into the address's fragment carried it there.
log_format {LOG_FORMAT} '$msec $request_time $dl_route "$upstream_addr" $status $request_method "$uri"';

upstream decoder_lens {{
    # consistent: a replica that stops answering hands its browsers to the next one on the ring (the app reopens
    # their view from the URL); a replica added or removed moves only about 1/K of the browsers.
    hash $dl_route consistent;
{servers}
}}

server {{
    listen {listen};
    server_name _;
    access_log {access_log} {LOG_FORMAT};
    add_header Set-Cookie $dl_route_cookie always;  # empty (not sent) once the browser has the cookie

    location / {{
        proxy_pass http://decoder_lens;
        proxy_http_version 1.1;  # websockets need HTTP/1.1 and the two headers below
        proxy_set_header Upgrade $http_upgrade;
        proxy_set_header Connection $dl_connection;
        proxy_set_header Host $http_host;  # with the port: Streamlit compares the websocket's Origin with it
        proxy_set_header X-Real-IP $remote_addr;
        proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
        proxy_set_header X-Forwarded-Proto $scheme;
        proxy_read_timeout 1d;  # the websocket /_stcore/stream stays open while a student reads
        proxy_send_timeout 1d;
        proxy_connect_timeout 3s;
        proxy_buffering off;
        proxy_next_upstream error timeout http_502 http_503;
    }}
}}
"""


def main_conf(run_dir: Path, site: str) -> str:
    """A whole nginx.conf for ``nginx -p RUN_DIR -c RUN_DIR/nginx.conf``: every path in ``run_dir``, in the
    foreground (the caller manages the process)."""
    user = ""
    if os.geteuid() == 0:  # root's workers would run as nobody: name it, with its own group
        pw = pwd.getpwnam("nobody")
        user = f"user {pw.pw_name} {grp.getgrgid(pw.pw_gid).gr_name};\n"
    tmp = run_dir / "tmp"
    indented = "".join(f"    {line}\n" if line else "\n" for line in site.splitlines())
    return f"""{user}daemon off;
worker_processes auto;
pid {run_dir}/nginx.pid;
error_log {run_dir}/error.log warn;
events {{
    worker_connections 4096;
}}
http {{
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
{indented}}}
"""


def find_nginx() -> str:
    found = shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if Path(p).exists()), None
    )
    if not found:
        sys.exit("nginx is missing: install Debian's nginx (apt-get install nginx)")
    return found


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


class Replica:
    """One ``streamlit run app.py`` on 127.0.0.1:``port``, its output in ``log``."""

    def __init__(self, index: int, port: int, log: Path, env: dict):
        self.index, self.port, self.log, self.env = index, port, log, env
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen | None = None
        self._log: TextIO | None = None

    def start(self) -> None:
        cmd = [
            sys.executable,
            "-m",
            "streamlit",
            "run",
            str(ROOT / "app.py"),
            "--server.port",
            str(self.port),
            "--server.address",
            "127.0.0.1",
            "--server.headless",
            "true",
            "--browser.gatherUsageStats",
            "false",
        ]
        if self._log:  # started again after a kill
            self._log.close()
        self._log = open(self.log, "a")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=self.env, stdout=self._log, stderr=subprocess.STDOUT)

    def wait_healthy(self, timeout: float = 180.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if (code := exit_code(self.proc)) is not None:
                raise RuntimeError(f"replica {self.index} exited with code {code}; see {self.log}")
            if healthy(self.url):
                return
            time.sleep(0.1)
        raise TimeoutError(f"replica {self.index} did not answer on {self.url} within {timeout:.0f} s")

    def kill(self) -> None:
        """Kill it at once, as a crash would."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=15)

    def stop(self) -> None:
        if self.proc:
            terminate(self.proc)
        if self._log:
            self._log.close()
            self._log = None


def exit_code(proc: subprocess.Popen | None) -> int | None:
    """The code ``proc`` exited with; None while it runs (or before it started)."""
    return None if proc is None else proc.poll()


def terminate(proc: subprocess.Popen, timeout: float = 15) -> None:
    """Stop ``proc`` if it still runs: asked to (SIGTERM), killed when it has not ended within ``timeout`` s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=timeout)


def replica_env(model: Path | None, secret: str) -> dict:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "STREAMLIT_SERVER_COOKIE_SECRET": secret}
    if model is not None:
        env[ENV_MODEL] = str(model)
    return env


def start_replicas(ports: list[int], run_dir: Path, model: Path | None, env: dict | None = None) -> list[Replica]:
    """Start every replica at once (``env`` added to their environment), then wait until each answers (stopping them
    all if one does not)."""
    env = replica_env(model, secrets.token_hex(32)) | (env or {})
    replicas = [Replica(i, p, run_dir / f"replica-{i}.log", env) for i, p in enumerate(ports)]
    try:
        for r in replicas:
            r.start()
        for r in replicas:
            r.wait_healthy()
    except BaseException:
        for r in replicas:
            r.stop()
        raise
    return replicas


class Nginx:
    """nginx in the foreground on ``run_dir/nginx.conf``; its access log is ``run_dir/access.log``."""

    def __init__(self, run_dir: Path, listen: str, ports: list[int]):
        self.run_dir = run_dir
        self.access_log = run_dir / "access.log"
        self.conf = run_dir / "nginx.conf"
        (run_dir / "tmp").mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:  # the workers (nobody) open the temporary paths
            for d in (run_dir, run_dir / "tmp"):
                d.chmod(0o755)
        self.conf.write_text(main_conf(run_dir, site_conf(listen, ports, str(self.access_log))))
        self.proc: subprocess.Popen | None = None

    def start(self, url: str, timeout: float = 30.0) -> None:
        nginx = find_nginx()
        check = subprocess.run(
            [nginx, "-t", "-q", "-p", str(self.run_dir), "-c", str(self.conf)], capture_output=True, text=True
        )
        if check.returncode:
            raise RuntimeError(f"nginx rejects {self.conf}:\n{check.stderr}")
        with open(self.run_dir / "nginx.stderr", "w") as err:  # the child keeps its own copy of the handle
            self.proc = subprocess.Popen(
                [nginx, "-p", str(self.run_dir), "-c", str(self.conf)], stdout=subprocess.DEVNULL, stderr=err
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"nginx exited with code {self.proc.returncode}; see {self.run_dir}/error.log")
            if healthy(url):
                return
            time.sleep(0.1)
        raise TimeoutError(f"nginx did not answer on {url} within {timeout:.0f} s")

    def stop(self) -> None:
        """Graceful stop (SIGQUIT): open connections are closed and logged first."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGQUIT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)


def default_replicas() -> int:
    return max(1, min(os.cpu_count() or 1, 8))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--replicas",
        type=int,
        default=default_replicas(),
        help="streamlit processes (default: one per core, at most 8)",
    )
    ap.add_argument("--port", type=int, default=8501, help="the port the class opens (default 8501)")
    ap.add_argument("--listen", default="0.0.0.0", help="the address nginx listens on (default every address)")
    ap.add_argument("--first-port", type=int, default=8511, help="replica i listens on 127.0.0.1:FIRST+i")
    ap.add_argument("--model", type=Path, help="model directory (default: the app's default)")
    ap.add_argument("--run-dir", type=Path, help="nginx's configuration, logs and temporary files (default: new)")
    ap.add_argument(
        "--print-site",
        action="store_true",
        help="print the configuration for a system nginx (conf.d / sites-available) and exit",
    )
    ap.add_argument(
        "--upstream-host",
        default="127.0.0.1",
        help="--print-site: the replicas' host (compose: the service's name, which resolves to every replica)",
    )
    ap.add_argument("--access-log", default=SYSTEM_ACCESS_LOG, help="--print-site: nginx's access log")
    args = ap.parse_args(argv)
    if args.replicas < 1:
        ap.error("--replicas must be at least 1")
    ports = [args.first_port + i for i in range(args.replicas)]
    if args.print_site:
        print(site_conf(str(args.port), ports, args.access_log, args.upstream_host), end="")
        return 0
    busy = [p for p in ports if not port_free(p)]
    if busy or not port_free(args.port, args.listen):
        ap.error(f"port(s) in use: {busy + ([] if port_free(args.port, args.listen) else [args.port])}")
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="decoder-lens-"))
    run_dir.mkdir(parents=True, exist_ok=True)
    stopping = False

    def on_signal(signum, frame) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(f"starting {args.replicas} replica(s) on 127.0.0.1:{ports[0]}–{ports[-1]} (logs in {run_dir}) …", flush=True)
    replicas = start_replicas(ports, run_dir, args.model)
    nginx = Nginx(run_dir, f"{args.listen}:{args.port}", ports)
    try:
        nginx.start(f"http://127.0.0.1:{args.port}")
        print(
            f"serving on http://{socket.gethostname()}:{args.port}/ (nginx in front of {args.replicas} "
            f"replica(s)); Ctrl+C stops",
            flush=True,
        )
        while not stopping:
            time.sleep(1)
            if (code := exit_code(nginx.proc)) is not None:
                print(f"nginx exited with code {code}; see {run_dir}/error.log", file=sys.stderr)
                return 1
            for r in replicas:
                if not stopping and (code := exit_code(r.proc)) is not None:
                    print(
                        f"replica {r.index} (port {r.port}) exited with code {code}; restarting",
                        file=sys.stderr,
                        flush=True,
                    )
                    r.stop()
                    r.start()
    finally:
        nginx.stop()
        for r in replicas:
            r.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
