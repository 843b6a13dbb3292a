"""Hosts that share the database, the broker and the artifact store, and never a disk.

A `Host` is a process tree started under `unshare --mount --uts --propagation private` with a
shell prologue that, inside its own mount namespace:

1. bind-mounts the host's own directory (`<root>/hosts/<name>`) onto one path that every host
   uses, `<root>/private` (its STEPWISE_VAR_DIR, PRM_MODEL_DIR and TMPDIR lie under it);
2. mounts an empty tmpfs over `<root>/hosts`, the folder that holds every host's real
   directory, so none of them is reachable from the host any more;
3. names the host (its own UTS namespace: `socket.gethostname()` and Celery's `%h`).

So an absolute path that one host writes into a record (`<root>/private/var/scratch/...`)
names, on every other host, a file of that host's own, or nothing: the same text, different
content, as on machines that share no disk. A directory store (STORE_URL) lies outside
`<root>/hosts` and plays the shared mount (NFS); an S3 store is reached over the network.
The namespace lives as long as its processes: nothing has to be unmounted afterwards.

The test process itself is none of the hosts: it reads every host's directory at its real
place (`Host.real`) to check what each one holds.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent

# The prologue: "$@" is the host's command, run in place of the shell once the mounts are made.
PROLOGUE = """set -eu
mount --bind {real} {common}
mount -t tmpfs -o size=1m,mode=0755 stepwise-hidden-hosts {hidden}
hostname {name}
cd {cwd}
exec "$@"
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def namespaces_work(scratch: Path) -> tuple[bool, str]:
    """Whether this machine lets us make private mount and UTS namespaces (root, or
    CAP_SYS_ADMIN); (False, why) otherwise."""
    probe = scratch / "unshare-probe"
    (probe / "hidden").mkdir(parents=True, exist_ok=True)
    script = f"mount -t tmpfs none {shlex.quote(str(probe / 'hidden'))} && hostname probe"
    try:
        done = subprocess.run(
            ["unshare", "--mount", "--uts", "--propagation", "private", "sh", "-c", script],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"unshare cannot run here: {exc}"
    if done.returncode != 0:
        return False, f"unshare --mount --uts is not permitted here: {done.stderr.strip()}"
    return True, ""


@dataclass
class Host:
    """One host: its name, its real directory (what the test reads), its environment."""

    name: str
    cluster: Cluster
    env: dict[str, str]
    processes: list[tuple[subprocess.Popen, Path]] = field(default_factory=list)

    @property
    def real(self) -> Path:
        return self.cluster.hidden / self.name

    def real_path(self, private: Path | str) -> Path:
        """Where a path this host names under the common path lies for the test process."""
        return self.real / Path(private).relative_to(self.cluster.common)

    @property
    def var(self) -> Path:
        """Its STEPWISE_VAR_DIR as the host names it (the same text on every host)."""
        return self.cluster.common / "var"

    def argv(self, command: list[str], *, cwd: Path = ROOT) -> list[str]:
        """`command` as this host runs it, in `cwd` (a path as the host sees it)."""
        prologue = PROLOGUE.format(
            real=shlex.quote(str(self.real)),
            common=shlex.quote(str(self.cluster.common)),
            hidden=shlex.quote(str(self.cluster.hidden)),
            name=shlex.quote(self.name),
            cwd=shlex.quote(str(cwd)),
        )
        return [
            "unshare",
            "--mount",
            "--uts",
            "--propagation",
            "private",
            "sh",
            "-c",
            prologue,
            self.name,
            *command,
        ]

    def start(self, command: list[str], *, label: str, **env: str) -> subprocess.Popen:
        """A long-running process of this host (a server, a worker), its own process group;
        its output goes to `<root>/logs/<host>-<label>.log`."""
        log_path = self.cluster.logs / f"{self.name}-{label}.log"
        with log_path.open("w") as log:
            process = subprocess.Popen(
                self.argv(command),
                cwd=ROOT,
                env={**self.env, **env},
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        process.log_path = log_path
        self.processes.append((process, log_path))
        return process

    def run(
        self,
        command: list[str],
        *,
        timeout: float = 300,
        check: bool = True,
        cwd: Path = ROOT,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess:
        """A command on this host (a management command, a script), to its end; `env`
        replaces the host's environment (a script that must see nothing of stepwise's)."""
        done = subprocess.run(
            self.argv(command, cwd=cwd),
            cwd=ROOT,
            env=self.env if env is None else env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"`{' '.join(command)}` on {self.name} exited {done.returncode}:\n"
                f"{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
            )
        return done

    def manage(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
        """`manage.py ARGS` on this host, with its settings."""
        return self.run([sys.executable, str(ROOT / "manage.py"), *args], timeout=timeout)

    def stop(self) -> None:
        for process, _ in self.processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGTERM)
        for process, _ in self.processes:
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=30)

    def log_tail(self, chars: int = 3000) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-chars:]}"
            for _, path in self.processes
            if path.exists()
        )


@dataclass
class Cluster:
    """The hosts of one test under `root`: `root/hosts/<name>` (hidden from every host),
    `root/private` (where each host sees its own), `root/logs` (the test's)."""

    root: Path
    env: dict[str, str]
    hosts: dict[str, Host] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for folder in (self.hidden, self.common, self.logs):
            folder.mkdir(parents=True, exist_ok=True)

    @property
    def hidden(self) -> Path:
        return self.root / "hosts"

    @property
    def common(self) -> Path:
        return self.root / "private"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def add(self, name: str, **env: str) -> Host:
        real = self.hidden / name
        for sub in ("var", "models", "tmp"):
            (real / sub).mkdir(parents=True, exist_ok=True)
        (real / "whoami").write_text(name + "\n")
        common = self.common
        host = Host(
            name=name,
            cluster=self,
            env={
                **self.env,
                "STEPWISE_VAR_DIR": str(common / "var"),
                "PRM_MODEL_DIR": str(common / "models"),
                "TMPDIR": str(common / "tmp"),
                # The store's cache and scratch default under the var dir: the host's own.
                "STORE_CACHE_DIR": str(common / "var" / "cache"),
                "STORE_SCRATCH_DIR": str(common / "var" / "scratch"),
                **env,
            },
        )
        self.hosts[name] = host
        return host

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]

    def stop(self) -> None:
        for host in self.hosts.values():
            host.stop()

    def log_tails(self, chars: int = 3000) -> str:
        return "\n".join(host.log_tail(chars) for host in self.hosts.values())


def wait_for_log(process: subprocess.Popen, text: str, *, timeout: float) -> None:
    """Until `text` appears in the process's log; fails with the log if it exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = process.log_path.read_text(errors="replace")
        if text in log:
            return
        if process.poll() is not None:
            raise AssertionError(f"{process.log_path.name} exited first:\n{log[-3000:]}")
        time.sleep(0.3)
    raise AssertionError(
        f"no {text!r} in {process.log_path.name} within {timeout:.0f} s:\n"
        f"{process.log_path.read_text(errors='replace')[-3000:]}"
    )
