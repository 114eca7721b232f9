"""Two "hosts" on one machine: the ranks run in two network namespaces joined by a veth pair and
talk over TCP, started by mpiexec with a hostfile as on a cluster (README, "Several machines").

mpiexec runs in the first namespace; its ssh launcher is a small script that enters the
namespace of the host it is asked for (``ip netns exec``), where a real one would log in. UCX
(the mpich wheel's default network module) would see that both ranks share a kernel and use
shared memory, so ``UCX_TLS=tcp,self`` makes them use TCP on the interface ``tr0`` (each end of
the veth pair is called so inside its namespace, as eth0 is on every host of a cluster).

Skipped where namespaces cannot be made (not root, no ``ip``, a sandbox that forbids them).
"""
import os
import random
import shutil
import signal
import subprocess
import time

import pytest

import required
from run_helpers import (assert_bitwise_equal, communicate_or_fail, final_arrays, logged_step,
                         only_run_dir, trainer_cmd)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


MPIEXEC = required.mpiexec()
pytestmark = [pytest.mark.dist,
              pytest.mark.skipif(MPIEXEC is None, reason="needs the dist extra (mpi4py + mpich)")]

IPS = ("10.77.0.1", "10.77.0.2")
# Enters the namespace of the host hydra names (it calls its launcher as "ssh -x HOST COMMAND",
# the command quoted for a remote shell).
SSH = """#!/bin/sh
[ "$1" = "-x" ] && shift
host=$1; shift
case "$host" in
  %s) ns=%s ;;
  %s) ns=%s ;;
  *) echo "no such test host: $host" >&2; exit 255 ;;
esac
exec ip netns exec "$ns" sh -c "$*"
"""

CONFIG = """\
model: {name: mlp, args: {hidden: [8], classes: 3}, init: xavier}
data:
  train: {type: synthetic, task: classification, num_samples: 96, num_features: 5,
          num_classes: 3, seed: 4}
  batch_size: 16
loss: softmax_cross_entropy
optimizer: {name: sgd, params: {learning_rate: 0.1, momentum: 0.9}}
kvstore: dist_sync
seed: 3
steps: %d
log_every: 5
checkpoint: {every_steps: 100000, every_epoch: false}
"""


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=check)


class TwoHosts:
    def __init__(self, folder, names):
        self.names = names
        self.ssh = folder / "netns-ssh"
        self.ssh.write_text(SSH % (IPS[0], names[0], IPS[1], names[1]))
        self.ssh.chmod(0o755)
        self.hostfile = folder / "hostfile"
        self.hostfile.write_text("".join("%s:1\n" % ip for ip in IPS))

    def popen(self, args, timeout_s):
        """``mpiexec -f hostfile -n 2 trainer ARGS`` from the first host."""
        cmd = ["ip", "netns", "exec", self.names[0], MPIEXEC, "-iface", "tr0",
               "-launcher", "ssh", "-launcher-exec", str(self.ssh), "-f", str(self.hostfile),
               "-n", "2"] + trainer_cmd(*args)
        env = dict(os.environ, UCX_TLS="tcp,self", UCX_NET_DEVICES="tr0",
                   TRAINER_DIST_TIMEOUT=str(timeout_s), OMP_NUM_THREADS="1",
                   OPENBLAS_NUM_THREADS="1")
        env.pop("TRAINER_DIST_MONITOR", None)
        return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    def pids(self, which=(0, 1)) -> list:
        found = []
        for i in which:
            out = _ip("netns", "pids", self.names[i], check=False).stdout
            found += [int(p) for p in out.split()]
        return found

    def kill(self, which):
        for pid in self.pids(which):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


@pytest.fixture
def two_hosts(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root")
    if shutil.which("ip") is None:
        pytest.skip("no `ip` command (iproute2) to make network namespaces")
    tag = "%04x%04x" % (os.getpid() & 0xFFFF, random.getrandbits(16))   # parallel runs differ
    names, made = ["trn%s%s" % (tag, end) for end in "ab"], []
    try:
        for name in names:
            got = _ip("netns", "add", name, check=False)
            if got.returncode != 0:
                pytest.skip("cannot make a network namespace here: %s" % got.stderr.strip())
            made.append(name)
        ends = ["tv%s%s" % (tag, end) for end in "ab"]     # interface names: 15 bytes at most
        got = _ip("link", "add", ends[0], "type", "veth", "peer", "name", ends[1], check=False)
        if got.returncode != 0:
            pytest.skip("cannot make a veth pair here: %s" % got.stderr.strip())
        for name, end, ip in zip(names, ends, IPS):
            _ip("link", "set", end, "netns", name)
            _ip("-n", name, "link", "set", end, "name", "tr0")
            _ip("-n", name, "addr", "add", ip + "/24", "dev", "tr0")
            _ip("-n", name, "link", "set", "tr0", "up")
            _ip("-n", name, "link", "set", "lo", "up")
        yield TwoHosts(tmp_path, names)
    finally:
        for name in made:
            for pid in _ip("netns", "pids", name, check=False).stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
            _ip("netns", "del", name, check=False)   # takes its end of the veth pair along


def _wait_for_step(proc, root, step):
    deadline = time.monotonic() + 60
    while logged_step(root) < step:
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the job made no progress"
        time.sleep(0.02)


def _assert_gone(hosts, within=20.0):
    deadline = time.monotonic() + within
    while hosts.pids() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not hosts.pids(), "processes of the job left running in the namespaces"


def test_two_hosts_train_like_two_local_ranks(two_hosts, tmp_path):
    config = tmp_path / "run.yaml"
    config.write_text(CONFIG % 24)
    local = subprocess.run([MPIEXEC, "-n", "2"] + trainer_cmd("run", config, "--run-dir",
                                                                 tmp_path / "local", "-q"),
                           cwd=REPO, capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert local.returncode == 0, local.stderr
    proc = two_hosts.popen(["run", config, "--run-dir", tmp_path / "hosts", "-q"], 30)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    for got, want in zip(final_arrays(only_run_dir(tmp_path / "hosts")),
                         final_arrays(only_run_dir(tmp_path / "local"))):
        assert_bitwise_equal(got, want)
    _assert_gone(two_hosts)


@pytest.mark.parametrize("fault", ["link down", "host killed"])
def test_losing_a_host_ends_the_job_within_the_timeout(two_hosts, tmp_path, fault):
    config = tmp_path / "run.yaml"
    config.write_text(CONFIG % 1000000)
    timeout = 3
    proc = two_hosts.popen(["run", config, "--run-dir", tmp_path / "runs", "-q"], timeout)
    _wait_for_step(proc, tmp_path / "runs", 20)
    if fault == "link down":
        # As a network or a host's power failing: no connection is closed, nothing is said.
        _ip("-n", two_hosts.names[0], "link", "set", "tr0", "down")
    else:
        two_hosts.kill([1])
    # The deadline is a hang guard, not a speed test (room for a machine busy with other tests):
    # without the abort, rank 0 would wait (or sit in MPI_Finalize) forever.
    out, err = communicate_or_fail(proc, timeout + 40, "losing a host")
    assert proc.returncode != 0
    if fault == "link down":
        assert "rank 0 of 2 (pid" in err
        assert "timed out after 3 s waiting for rank 1 in allreduce of key" in err
    # Both "hosts" are left empty: the far one's rank timed out and aborted on its own.
    _assert_gone(two_hosts, within=timeout + 30.0)
