"""The rendezvous: a single-host run listens on loopback only; a busy port is one line."""

import os
import re
import shutil
import signal
import socket
import subprocess

import pytest

from collbench.bench import distributed
from collbench.bench.distributed import rendezvous_bind
from tests.helpers import collbench_process as collbench
from tests.helpers import meta_of, rank_pid, start, wait_for_rows

LONG_SWEEP = ["-c", "all_reduce,all_gather", "-b", "1K", "-e", "4M", "-n", "40", "-w", "2"]
LONG_SWEEP += ["--repeats", "1"]


@pytest.mark.parametrize(
    "master_addr, bind",
    [
        ("127.0.0.1", "127.0.0.1"),
        ("localhost", "127.0.0.1"),
        ("10.1.2.3", "10.1.2.3"),
        ("::1", "::1"),
    ],
)
def test_rank_0_binds_the_address_it_rendezvous_on(master_addr, bind):
    assert rendezvous_bind(master_addr) == bind


def test_a_host_name_that_is_loopback_only_here_binds_every_interface(monkeypatch):
    """Debian maps the host's own name to 127.0.1.1; its peers resolve it to a real address."""
    fake = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.1.1", 0))]
    monkeypatch.setattr(distributed.socket, "getaddrinfo", lambda *args, **kwargs: fake)
    assert rendezvous_bind("node-0") == ""
    assert rendezvous_bind("node-0", single_host=True) == "127.0.1.1"  # no peer elsewhere


def _listening(pid):
    """The local addresses pid listens on (TCP), from `ss -ltnp`."""
    table = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    return [line.split()[3] for line in table.splitlines() if f"pid={pid}," in line]


@pytest.mark.slow  # real gloo ranks
@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2)")
def test_a_local_run_listens_on_loopback_only(tmp_path):
    out = tmp_path / "run"
    process = start("sweep", *LONG_SWEEP, "--quiet", "--out", str(out))
    try:
        wait_for_rows(out, 1)
        addresses = [address for rank in range(2) for address in _listening(rank_pid(out, rank))]
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)
    port = meta_of(out)["rendezvous"].split()[0].rsplit(":", 1)[1]
    assert f"127.0.0.1:{port}" in addresses  # rank 0's store
    assert all(address.startswith("127.0.0.1:") for address in addresses), addresses
    assert meta_of(out)["rendezvous_bind"] == f"127.0.0.1:{port}"


@pytest.mark.slow  # a real rank process (~3 s)
def test_launcher_none_on_a_busy_port_is_one_line(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = {
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "RANK": "0",
            "WORLD_SIZE": "1",
            "LOCAL_RANK": "0",
            "LOCAL_WORLD_SIZE": "1",
        }
        out = tmp_path / "run"
        args = ("sweep", "--launcher", "none", "-c", "all_reduce", "-e", "64", "--out", str(out))
        done = collbench(*args, env={**os.environ, **env})
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert re.match(
        rf"collbench: error: rank 0: the rendezvous port {port} on 127.0.0.1 is already in use",
        lines[0],
    ), lines[0]


def test_a_store_that_refuses_the_bound_socket_falls_back_to_the_classic_backend(monkeypatch):
    """torch releases whose libuv store takes no listening descriptor: the classic backend
    serves the loopback socket instead, and a real client reaches it there."""
    from datetime import timedelta

    import torch.distributed as dist

    from collbench.bench.rank_env import RunEnv

    real, backends = dist.TCPStore, []

    def libuv_without_fd_support(*args, **kwargs):
        backends.append(kwargs.get("use_libuv", "default"))
        if "master_listen_fd" in kwargs and "use_libuv" not in kwargs:
            raise RuntimeError("libuv backend does not support master_listen_fd")
        return real(*args, **kwargs)

    monkeypatch.setattr(dist, "TCPStore", libuv_without_fd_support)
    port = distributed.free_port()
    env = RunEnv(0, 2, 0, 2, "127.0.0.1", port)
    server = distributed._rendezvous_store(env, timedelta(seconds=20))
    client = real("127.0.0.1", port, 2, False, timeout=timedelta(seconds=20))
    client.set("probe", "ok")
    assert server.get("probe") == b"ok"
    assert backends == ["default", False]
