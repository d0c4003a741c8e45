"""A private PostgreSQL cluster on loopback for the fleet tests: Debian's `postgresql` package (installed by
`scripts/setup.sh test`), its binaries from /usr/lib/postgresql/<version>/bin (not on PATH on a fresh Debian
machine), `initdb` into a temp folder, `pg_ctl` on a free 127.0.0.1 port; the Prefect role and database are
created with docs/service.md's own commands (`as_system_user`).  Stopped and removed at the end.

PostgreSQL refuses to run as root: as root, every server command runs as the `postgres` system user the Debian
package creates (`runuser -u postgres --`), in a temp folder that user owns; as anyone else, directly."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.s3server import free_port

PG_ROOT = Path("/usr/lib/postgresql")          # Debian: /usr/lib/postgresql/<major version>/bin
SYSTEM_USER = "postgres"                       # the Debian package's system user (servers run as it under root)
SUPERUSER = "postgres"                         # the cluster's bootstrap superuser (trust over its private socket)
START_TIMEOUT_S = 120                          # s: pg_ctl -w gives up (and the test fails) after this
COMMAND_TIMEOUT_S = 120                        # s: initdb, createdb, psql


def pg_bin_dir() -> Path | None:
    """The bin folder of the newest PostgreSQL installed the Debian way, or None."""
    found = [p.parent for p in PG_ROOT.glob("*/bin/pg_ctl") if (p.parent / "initdb").is_file()]
    return max(found, key=lambda b: int(b.parent.name) if b.parent.name.isdigit() else -1, default=None)


def missing_reason() -> str | None:
    """Why a cluster cannot be started here (None: it can)."""
    if pg_bin_dir() is None:
        return f"PostgreSQL is not installed (no {PG_ROOT}/<version>/bin/initdb; scripts/setup.sh test installs it)"
    if os.geteuid() == 0 and (shutil.which("runuser") is None or not _user_exists(SYSTEM_USER)):
        return f"running as root needs runuser and the {SYSTEM_USER!r} system user (Debian's postgresql creates it)"
    return None


def _user_exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


class PgServer:
    """initdb + pg_ctl start in a temp folder, listening on 127.0.0.1:<port>; `as_system_user(line)` runs a
    documented `sudo -u postgres …` line against it (docs/service.md creates the Prefect role and database)."""

    def __init__(self):
        self.bin = pg_bin_dir()
        assert self.bin is not None, missing_reason()
        self.as_root = os.geteuid() == 0
        self.root = Path(tempfile.mkdtemp(prefix="chattts-pg-"))      # /tmp: reachable by the postgres user
        self.data, self.socket_dir, self.log_path = self.root / "data", self.root / "run", self.root / "server.log"
        self.port = free_port()
        self.host = "127.0.0.1"
        self.started = False
        self.socket_dir.mkdir()
        if self.as_root:
            import pwd

            pw = pwd.getpwnam(SYSTEM_USER)
            for p in (self.root, self.socket_dir):
                os.chown(p, pw.pw_uid, pw.pw_gid)
        try:
            self._run("initdb", "-D", str(self.data), "-U", SUPERUSER, "--auth-local=trust",
                      "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8", "--no-sync")
            self.started = True
            self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log_path), "-w", "-t", str(START_TIMEOUT_S),
                      "-o", f"-c listen_addresses={self.host} -p {self.port} -k {self.socket_dir} -c fsync=off",
                      "start")
        except BaseException:
            self.stop()
            raise

    def _run(self, tool: str, *args: str) -> str:
        argv = [str(self.bin / tool), *args]
        if self.as_root:
            argv = ["runuser", "-u", SYSTEM_USER, "--", *argv]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, cwd=self.root)
        if p.returncode != 0:
            log = self.log_path.read_text(errors="replace")[-3000:] if self.log_path.is_file() else ""
            raise AssertionError(f"{' '.join(argv)} exited {p.returncode}:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
                                 f"\n{log}")
        return p.stdout

    def as_system_user(self, line: str) -> str:
        """A documented `sudo -u postgres TOOL ARGS…` line (psql, createdb, createuser …) run against this
        cluster: the tool from its bin folder, as the superuser over the private socket."""
        import shlex

        words = shlex.split(line)
        assert words[:3] == ["sudo", "-u", SYSTEM_USER] and len(words) > 3, line
        return self._run(words[3], "-h", str(self.socket_dir), "-p", str(self.port), "-U", SUPERUSER, *words[4:])

    def stop(self) -> None:
        if self.started:
            self.started = False
            try:
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
            except (AssertionError, subprocess.TimeoutExpired):
                pass
        shutil.rmtree(self.root, ignore_errors=True)
