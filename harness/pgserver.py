"""A throwaway PostgreSQL server for the tests and benchmarks: Debian's ``postgresql`` binaries (``.ci/run`` installs
them) run on a fresh data directory in a temporary folder, listening on 127.0.0.1 at a free port, trusted from
there only, and removed with the folder at the end.

PostgreSQL refuses to run as root: under root (CI, the sandbox) every command runs as the ``postgres`` user the
Debian package creates, and the folder is handed to that user. ``stop(immediate=True)`` is a crash (no checkpoint;
the write-ahead log brings every committed transaction back on the next start), ``restart`` is a stop, an optional
outage and a start on the same port and data, as a database restarted mid-class.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

USER = "postgres"  # the Debian package's system user, who runs the server when we are root
DATABASE = "decoder_lens"
ROLE = "decoder_lens"


def binaries() -> Path:
    """The newest installed PostgreSQL's bin folder (Debian: /usr/lib/postgresql/VERSION/bin)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        raise FileNotFoundError("PostgreSQL is missing: install Debian's postgresql (apt-get install postgresql)")
    return Path(found[-1]).parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class TempPostgres:
    """One server on ``root`` (a new temporary folder by default); ``url`` is SQLAlchemy's (psycopg 3)."""

    def __init__(self, root: Path | None = None, port: int | None = None):
        self.bin = binaries()
        self.root = Path(root or tempfile.mkdtemp(prefix="decoder-lens-pg-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self.data, self.log = self.root / "data", self.root / "server.log"
        self.port = port or _free_port()
        self.as_root = os.geteuid() == 0
        if self.as_root:
            pw = pwd.getpwnam(USER)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        self.url = f"postgresql+psycopg://{ROLE}@127.0.0.1:{self.port}/{DATABASE}"

    def _run(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        kw: dict[str, Any] = (
            {"user": USER, "group": pwd.getpwnam(USER).pw_gid, "extra_groups": []} if self.as_root else {}
        )
        proc = subprocess.run([str(self.bin / cmd[0]), *cmd[1:]], cwd=self.root, capture_output=True, text=True, **kw)
        if check and proc.returncode:
            raise RuntimeError(f"{cmd[0]} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()[-400:]}")
        return proc

    def start(self) -> TempPostgres:
        """Initialise the data directory on the first start (one role, one database), then start and wait."""
        first = not self.data.exists()
        if first:
            self._run("initdb", "-D", str(self.data), "-U", ROLE, "--auth=trust", "-E", "UTF8", "--no-sync")
        opts = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c max_connections=200"
        self._run("pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data), "-l", str(self.log), "-o", opts)
        if first:
            self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", ROLE, DATABASE)
        return self

    def running(self) -> bool:
        return self._run("pg_ctl", "status", "-D", str(self.data), check=False).returncode == 0

    def stop(self, immediate: bool = False) -> None:
        """Stop the server: ``immediate`` as a crash (clients cut at once, recovery on the next start)."""
        if self.data.exists() and self.running():
            self._run("pg_ctl", "stop", "-w", "-D", str(self.data), "-m", "immediate" if immediate else "fast")

    def restart(self, down_s: float = 0.0, immediate: bool = True) -> None:
        self.stop(immediate=immediate)
        time.sleep(down_s)
        self.start()

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> TempPostgres:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.remove()
