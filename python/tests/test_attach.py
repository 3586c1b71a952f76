"""The probe started in a running process, as ``leakspy attach`` starts it:
long after ``torch.optim`` was imported, with its settings as arguments (the
environment untouched), switched off for good when the monitor hangs up,
and started afresh by a later attach.

The job runs the loader's steps itself (the Rust tests run them through the
real injection): put the package's folder on ``sys.path`` for the import,
then ``leakspy._attach.start(socket, budget, census)``.
"""

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "leakspy"


def has_torch():
    try:
        import torch  # noqa: F401
    except Exception:
        return False
    return True


class Listener:
    """One monitor socket; keeps the messages of each connection."""

    def __init__(self, root):
        self.socket = os.path.join(root, "probe-%d.sock" % id(self))
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(self.socket)
        self.srv.listen(4)
        self.conns = []
        self.msgs = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            self.conns.append(c)
            threading.Thread(target=self._read, args=(c,), daemon=True).start()

    def _read(self, c):
        buf = b""
        while True:
            try:
                data = c.recv(65536)
            except OSError:
                return
            if not data:
                return
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                with self.lock:
                    self.msgs.append(json.loads(line))

    def kinds(self, kind):
        with self.lock:
            return [m for m in self.msgs if m["kind"] == kind]

    def hang_up(self):
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()
        self.srv.close()


JOB = """
import os, sys, time
import torch

D, SOCK1, SOCK2, HUNG = sys.argv[1:5]
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.01)

def step():
    opt.zero_grad()
    model(torch.randn(8, 4)).sum().backward()
    opt.step()

for _ in range(10):
    step()
assert "leakspy" not in sys.modules

def attach(sock):
    if "leakspy" not in sys.modules:
        sys.path.insert(0, D)
        try:
            import leakspy
        finally:
            sys.path.remove(D)
    from leakspy import _attach
    _attach.start(sock, 0.01, False)

path_before = list(sys.path)
attach(SOCK1)
from leakspy import _probe
import leakspy
from torch.optim.optimizer import _global_optimizer_post_hooks
on = (_probe.S.active, len(_global_optimizer_post_hooks), leakspy._step_impl is not None)
clean = not any(k.startswith("LEAKSPY_") for k in os.environ) and sys.path == path_before
for _ in range(30):
    step()
    time.sleep(0.02)
print("on", *on, clean, flush=True)
while not os.path.exists(HUNG):
    time.sleep(0.01)
for _ in range(5):
    step()
    time.sleep(0.03)
print("off", _probe.S.active, len(_global_optimizer_post_hooks), leakspy._step_impl is None,
      flush=True)
attach(SOCK2)
for _ in range(10):
    step()
    time.sleep(0.03)
print("again", _probe.S.active, len(_global_optimizer_post_hooks), flush=True)
"""


def readline(p, timeout=60):
    """The job's next line, split; the job is killed if it says nothing in time
    (a failed assertion in it must not hang the suite)."""
    got = []
    t = threading.Thread(target=lambda: got.append(p.stdout.readline()), daemon=True)
    t.start()
    t.join(timeout)
    if not got:
        p.kill()
        t.join(5)
        raise AssertionError("the job said nothing for %s s: %r" % (timeout, p.stderr.read()))
    return got[0].split()


@pytest.mark.skipif(not has_torch(), reason="torch is not installed")
def test_attach_counts_steps_of_an_old_optimizer_and_switches_off_when_the_monitor_hangs_up():
    root = tempfile.mkdtemp(prefix="lsp-attach-")
    try:
        os.chmod(root, 0o700)
        shutil.copytree(str(PKG), os.path.join(root, "leakspy"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        first, second = Listener(root), Listener(root)
        hung = os.path.join(root, "hung")
        script = os.path.join(root, "job.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent(JOB))
        env = {k: v for k, v in os.environ.items() if not k.startswith("LEAKSPY_")}
        p = subprocess.Popen([sys.executable, script, root, first.socket, second.socket, hung],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        try:
            on = readline(p)
            assert on == [b"on", b"True", b"1", b"True", b"True"], on
            deadline = time.monotonic() + 10
            while not first.kinds("step") and time.monotonic() < deadline:
                time.sleep(0.02)
            hello = first.kinds("hello")
            assert len(hello) == 1 and hello[0]["attached"] is True, first.msgs
            steps = first.kinds("step")
            assert steps and steps[-1]["source"] == "optimizer", first.msgs
            assert steps[-1]["step"] >= 10, steps  # counted from the attach, not from 0 steps
            first.hang_up()
            open(hung, "w").close()
            off = readline(p)
            # Hook removed, leakspy.step() a no-op again.
            assert off == [b"off", b"False", b"0", b"True"], off
            again = readline(p)
            assert again == [b"again", b"True", b"1"], again
            out, err = p.communicate(timeout=30)
            assert p.returncode == 0 and err == b"" and out == b"", (out, err)
            deadline = time.monotonic() + 5
            while not second.kinds("step") and time.monotonic() < deadline:
                time.sleep(0.02)
            assert [h["attached"] for h in second.kinds("hello")] == [True], second.msgs
            assert second.kinds("step"), second.msgs
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
    finally:
        shutil.rmtree(root, ignore_errors=True)
