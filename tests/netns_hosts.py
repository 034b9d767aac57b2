"""Worker "hosts" on this machine for the multi-host tests: Linux network namespaces.

Each worker host is a network namespace with its own loopback and one veth link to the root
namespace, which plays the broker/database host (Redis, PostgreSQL and the test process live
there). A worker host cannot see the root namespace's loopback, where the services listen, so each
service it needs is forwarded by ``TcpForwarder`` from the link's root-side address (10.213.N.1)
to the service's loopback port: a worker reaches Redis and PostgreSQL only over the link, as it
would over a network. Worker hosts get their own temporary and data directories; only the
embedding cache is shared (a directory both mount, as a shared filesystem would be).

Needs root and ``ip`` (iproute2). Traffic stays on links this test made inside this machine.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

SUBNET = "10.213"  # 10.213.N.0/30 per worker host: .1 the root side, .2 the host


def netns_available() -> str | None:
    """None when worker hosts can be made here, else why not."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "network namespaces need iproute2 (apt-get install iproute2)"
    probe = f"sl-probe-{uuid.uuid4().hex[:6]}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode:
        return f"cannot make a network namespace: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


class TcpForwarder:
    """Forwards connections to ``listen`` on to ``target`` (host, port), in a thread of its own."""

    def __init__(self, listen: tuple[str, int], target: tuple[str, int]):
        self.listen, self.target = listen, target
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"forward-{listen[0]}:{listen[1]}")

    def __enter__(self) -> TcpForwarder:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError(f"could not listen on {self.listen}")
        return self

    def __exit__(self, *exc) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(asyncio.start_server(self._handle, *self.listen))
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # gone already
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


@dataclass
class WorkerHost:
    name: str  # the network namespace
    index: int
    root: Path  # its private disk (temporary and data directories)
    processes: list[subprocess.Popen] = field(default_factory=list)

    @property
    def gateway(self) -> str:
        """The broker/database host's address as this host sees it."""
        return f"{SUBNET}.{self.index}.1"

    def start(self, argv: list[str], *, env: dict[str, str], cwd: Path, log_path: Path) -> subprocess.Popen:
        """Run ``argv`` inside this host (its network, its temporary directory)."""
        full_env = {**env, "TMPDIR": str(self.root / "tmp"), "HOME": str(self.root)}
        with log_path.open("a") as log:
            process = subprocess.Popen(
                ["ip", "netns", "exec", self.name, *argv],
                cwd=cwd,
                env=full_env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.processes.append(process)
        return process

    def pids(self) -> list[int]:
        """The processes still alive in this host (zombies left out: they hold no resources)."""
        out = subprocess.run(["ip", "netns", "pids", self.name], capture_output=True, text=True).stdout
        return [int(p) for p in out.split() if not _is_zombie(int(p))]

    def kill_everything(self, timeout: float = 20.0) -> int:
        """SIGKILL every process in this host, as a host that loses power; returns how many.

        SIGKILL is asynchronous: a process is gone only once the kernel has torn it down (a worker
        holding a loaded model takes a moment to unmap), so this waits, killing again whatever is
        still listed, until the host is empty or ``timeout`` runs out.
        """
        killed = set(self.pids())
        deadline = time.monotonic() + timeout
        for process in self.processes:  # the whole process group at once: no child forks after
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        while pids := self.pids():
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            killed.update(pids)
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        for process in self.processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        return len(killed)

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        for process in self.processes:
            try:
                process.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


@contextmanager
def worker_hosts(n: int, *, base: Path, forward: dict[int, int]) -> Iterator[list[WorkerHost]]:
    """``n`` worker hosts, each linked to the root namespace, with ``forward`` (port on the link's
    root side -> port on the root loopback) forwarded for each. Everything is removed afterwards."""
    tag = uuid.uuid4().hex[:5]
    hosts: list[WorkerHost] = []
    with ExitStack() as stack:
        try:
            for i in range(1, n + 1):
                name, outside, inside = f"sl{tag}h{i}", f"sl{tag}o{i}", f"sl{tag}i{i}"
                root = base / f"host{i}"
                (root / "tmp").mkdir(parents=True, exist_ok=True)
                host = WorkerHost(name=name, index=100 + i, root=root)
                _ip("netns", "add", name)
                hosts.append(host)
                _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
                _ip("link", "set", inside, "netns", name)
                _ip("addr", "add", f"{host.gateway}/30", "dev", outside)
                _ip("link", "set", outside, "up")
                _ip("netns", "exec", name, "ip", "link", "set", "lo", "up")
                _ip("netns", "exec", name, "ip", "addr", "add", f"{SUBNET}.{host.index}.2/30", "dev", inside)
                _ip("netns", "exec", name, "ip", "link", "set", inside, "up")
                for listen_port, target_port in forward.items():
                    stack.enter_context(TcpForwarder((host.gateway, listen_port), ("127.0.0.1", target_port)))
            yield hosts
        finally:
            for host in hosts:
                host.stop()
            stack.close()
            for i, host in enumerate(hosts, start=1):
                subprocess.run(["ip", "link", "del", f"sl{tag}o{i}"], capture_output=True)
                subprocess.run(["ip", "netns", "del", host.name], capture_output=True)
