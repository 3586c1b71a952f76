"""The in-process probe, end to end: real Python subprocesses, started the way
`leakspy run` starts them (the package copied to a private 0700 folder D,
the bootstrap as D/sitecustomize.py, PYTHONPATH=D), talking to a real Unix
stream socket listener written here. Torch tests use the venv's torch; the
plain-Python ones also run under the other CPythons found on the machine.
"""

import json
import os
import select
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from leakspy._channel import MAX_BUFFER, Channel  # noqa: E402

PKG = Path(__file__).resolve().parents[1] / "leakspy"
OTHER_PYTHONS = [
    p
    for p in (
        "/root/.pyenv/versions/3.8.18/bin/python3",
        "/root/.pyenv/versions/3.13.0/bin/python3",
    )
    if os.path.exists(p)
]
PLAIN_PYTHONS = [sys.executable] + OTHER_PYTHONS


def has_torch():
    try:
        import torch  # noqa: F401
    except Exception:
        return False
    return True


needs_torch = pytest.mark.skipif(not has_torch(), reason="torch is not installed")


class Monitor:
    """A listener laid out like `leakspy run`'s: D/leakspy, D/sitecustomize.py,
    D/probe.sock. Keeps every message with the connection it came on."""

    def __init__(self, hang_up_after=None):
        self.dir = tempfile.mkdtemp(prefix="lsp-test-")
        os.chmod(self.dir, 0o700)
        shutil.copytree(str(PKG), os.path.join(self.dir, "leakspy"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy(str(PKG / "_bootstrap" / "sitecustomize.py"),
                    os.path.join(self.dir, "sitecustomize.py"))
        self.socket = os.path.join(self.dir, "probe.sock")
        self.hang_up_after = hang_up_after
        self.lock = threading.Lock()
        self.msgs = []  # (connection number, message)
        self.bad = []
        self.readers = []
        self.socks = {}
        self.conns = 0
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(self.socket)
        self.srv.listen(16)
        self.acceptor = threading.Thread(target=self._accept, daemon=True)
        self.acceptor.start()

    def _pending(self):
        """Whether a connection waits to be accepted."""
        try:
            return bool(select.select([self.srv], [], [], 0)[0])
        except (OSError, ValueError):
            return False

    def _accept(self):
        # A connection is accepted and its reader started under the lock
        # that `wait` checks under, so that a busy machine cannot leave
        # `wait` between the two, seeing no reader and nothing pending.
        while True:
            try:
                select.select([self.srv], [], [], 0.05)
            except (OSError, ValueError):
                return
            with self.lock:
                if not self._pending():
                    continue
                try:
                    c, _ = self.srv.accept()
                except OSError:
                    return
                n = self.conns
                self.conns += 1
                self.socks[n] = c
                t = threading.Thread(target=self._read, args=(c, n), daemon=True)
                t.start()
                self.readers.append(t)
            if self.hang_up_after is not None:
                return  # one connection, then nobody listens any more

    def _read(self, c, n):
        f = c.makefile("rb")
        got = 0
        for line in f:
            try:
                m = json.loads(line)
                assert isinstance(m, dict) and isinstance(m.get("kind"), str)
            except Exception:
                self.bad.append(line)
                continue
            with self.lock:
                self.msgs.append((n, m))
            got += 1
            if self.hang_up_after is not None and got >= self.hang_up_after:
                break
        f.close()
        c.close()
        if self.hang_up_after is not None:
            self.srv.close()

    def send(self, msg, conn=0):
        """Writes to a probe, as `leakspy run`'s monitor does (a burst, a
        last look)."""
        self.socks[conn].sendall((json.dumps(msg) + "\n").encode())

    def wait_for(self, kind, timeout=60.0, **fields):
        """The first message of ``kind`` (with ``fields``), waited for."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for m in self.messages(kind):
                if all(m.get(k) == v for k, v in fields.items()):
                    return m
            time.sleep(0.02)
        return None

    def env(self, probe=True, **extra):
        env = dict(os.environ)
        for k in list(env):
            if k.startswith("LEAKSPY_") or k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
                del env[k]
        env["PYTHONPATH"] = self.dir
        env.pop("PYTHONHOME", None)
        if probe:
            env["LEAKSPY_PROBE_SOCKET"] = self.socket
            env["LEAKSPY_PROBE_DIR"] = self.dir
            env["LEAKSPY_PROBE_BUDGET"] = "0.5"
        env.update(extra)
        return env

    def run(self, script, python=sys.executable, env=None, timeout=60):
        path = os.path.join(self.dir, "..", os.path.basename(self.dir) + "-script.py")
        path = os.path.abspath(path)
        with open(path, "w") as f:
            f.write(textwrap.dedent(script))
        self.script = path
        p = subprocess.run([python, path], env=env if env is not None else self.env(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout, cwd=os.path.dirname(path))
        self.wait()
        return p

    def wait(self, timeout=10.0):
        """Until every connection the program made has been read to its end
        (a program that never connected: half a second)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                pending = self.hang_up_after is None and self._pending()
                readers = list(self.readers)
            if not pending and readers and not any(t.is_alive() for t in readers):
                break
            if not pending and not readers and time.monotonic() > deadline - timeout + 0.5:
                break
            time.sleep(0.02)

    def messages(self, kind=None, pid=None):
        with self.lock:
            ms = [m for _, m in self.msgs]
        return [m for m in ms if (kind is None or m["kind"] == kind)
                and (pid is None or m.get("pid") == pid)]

    def close(self):
        try:
            self.srv.close()
        except OSError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)
        if hasattr(self, "script"):
            try:
                os.unlink(self.script)
            except OSError:
                pass


@pytest.fixture
def monitor():
    m = Monitor()
    yield m
    m.close()


def line_of(path, marker):
    with open(path) as f:
        for i, text in enumerate(f, 1):
            if marker in text:
                return i
    raise AssertionError(marker)


def steps(mon, source, pid=None):
    return [m["step"] for m in mon.messages("step", pid) if m["source"] == source]


def points(mon, pid=None):
    """Censuses that are points of the series: not the last look the probe
    takes at exit, after the program's own functions have returned."""
    return [c for c in mon.messages("census", pid) if c.get("look") != "exit"]


def suspects_by_key(mon, pid=None):
    """Last message per key (a later one adds the creation site)."""
    out = {}
    for m in mon.messages("suspect", pid):
        out[m["key"]] = m
    return out


def check_ok(p):
    assert p.returncode == 0, p.stderr.decode()
    assert p.stderr == b"", p.stderr.decode()


# -- start-up, bootstrap ------------------------------------------------------------


def test_hello_arrives(monitor):
    env = monitor.env(RANK="3", LOCAL_RANK="1", WORLD_SIZE=" 4 ")
    p = monitor.run("""
        import sys
        print("hello from", sys.argv[0])
    """, env=env)
    check_ok(p)
    hellos = monitor.messages("hello")
    assert len(hellos) == 1, monitor.msgs
    h = hellos[0]
    assert h["pid"] > 0 and h["ppid"] == os.getpid()
    assert h["python"] == "%d.%d.%d" % sys.version_info[:3]
    assert h["implementation"] == "cpython"
    assert h["executable"] == sys.executable
    assert h["argv"] == [monitor.script]
    assert h["probe"] == "0.1.0"
    assert h["forked"] is False
    assert (h["rank"], h["local_rank"], h["world_size"]) == (3, 1, 4)
    assert monitor.bad == []


def test_no_socket_variable_means_nothing_happens(monitor):
    p = monitor.run("""
        import sys, threading
        assert "leakspy" not in sys.modules, "the probe was loaded"
        finders = [type(f).__name__ for f in sys.meta_path]
        import leakspy
        leakspy.step()
        leakspy.step()
        same = finders == [type(f).__name__ for f in sys.meta_path]
        print(leakspy.__version__, leakspy._step_impl, same, threading.active_count(),
              "torch" in sys.modules)
    """, env=monitor.env(probe=False))
    check_ok(p)
    assert p.stdout.decode().split() == ["0.1.0", "None", "True", "1", "False"]
    assert monitor.conns == 0


def test_user_sitecustomize_still_runs(monitor):
    user = tempfile.mkdtemp(prefix="lsp-user-")
    try:
        with open(os.path.join(user, "sitecustomize.py"), "w") as f:
            f.write("import builtins\nbuiltins.USER_SITE_RAN = __name__\n")
        env = monitor.env()
        env["PYTHONPATH"] = monitor.dir + os.pathsep + user
        p = monitor.run("""
            import builtins, sys
            print(getattr(builtins, "USER_SITE_RAN", None), sys.modules["sitecustomize"].__file__)
        """, env=env)
        check_ok(p)
        out = p.stdout.decode().split()
        assert out == ["sitecustomize", os.path.join(user, "sitecustomize.py")]
        assert len(monitor.messages("hello")) == 1
    finally:
        shutil.rmtree(user, ignore_errors=True)


def test_census_off_sends_steps_only(monitor):
    p = monitor.run("""
        import leakspy
        kept = []
        for i in range(200):
            kept.append(object())
            leakspy.step()
    """, env=monitor.env(LEAKSPY_PROBE_CENSUS="0"))
    check_ok(p)
    assert steps(monitor, "manual")[-1] == 200
    assert monitor.messages("census") == [] and monitor.messages("suspect") == []


# -- steps ----------------------------------------------------------------------------


@needs_torch
def test_optimizer_and_manual_steps_are_counted_apart(monitor):
    p = monitor.run("""
        import sys
        assert "torch" not in sys.modules
        import torch
        import leakspy
        model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for i in range(50):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if i % 7 == 0:
                leakspy.step()
        print("done")
    """)
    check_ok(p)
    assert p.stdout == b"done\n"
    opt = steps(monitor, "optimizer")
    man = steps(monitor, "manual")
    assert opt[-1] == 50 and opt == sorted(opt) and len(opt) <= 50
    assert man[-1] == 8
    # Censuses follow steps (none before the third).
    for c in monitor.messages("census"):
        assert c["source"] in ("optimizer", "manual")
        assert c["step"] >= 3


# -- suspects, holders, creation sites ---------------------------------------------------


@needs_torch
def test_losses_kept_on_a_trainer_are_found_with_holder_and_creation_site(monitor):
    p = monitor.run("""
        import time
        import torch
        import torch.nn.functional as F


        class Trainer:
            def __init__(self):
                self.model = torch.nn.Linear(8, 1)
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
                self.losses = []

            def step(self, x, y):
                loss = F.mse_loss(self.model(x), y)  # LOSS_LINE
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                self.losses.append(loss)


        def named():
            # Until the probe has sent what the test looks for (the series
            # qualify at different censuses; on a loaded machine they come
            # later), 4 s at least.
            import leakspy._probe as probe
            sent = probe.S.sent
            keys = ("type:torch.Tensor", "tensors:cpu/float32/grad", "graph")
            return all(k in sent for k in keys) and any(
                sent[k]["created_at"] for k in keys)


        trainer = Trainer()
        t0 = time.monotonic()
        n = 0
        # 1,200 steps at least (about 4 s on an idle machine; a busy one
        # stretches them, it does not cut them), and until named.
        while n < 1200 or (not named() and time.monotonic() - t0 < 60):
            trainer.step(torch.randn(16, 8), torch.randn(16, 1))
            time.sleep(0.002)
            n += 1
        print("trained")
    """, env=monitor.env(LEAKSPY_PROBE_BUDGET="1.0"), timeout=90)
    check_ok(p)
    loss_line = line_of(monitor.script, "LOSS_LINE")
    sus = suspects_by_key(monitor)
    for key in ("type:torch.Tensor", "tensors:cpu/float32/grad", "graph"):
        assert key in sus, sorted(sus)
        s = sus[key]
        h = s["holder"]
        assert h["kind"] == "attribute" and h["path"] == "Trainer.losses", s
        assert h["container"] == "list" and h["chain"] == ["Tensor", "list", "Trainer"]
        assert h["file"] == monitor.script
        assert h["line"] == line_of(monitor.script, "self.losses = []")
        assert s["per_census"] >= 1 and s["count"] > 0
        assert s["example"]["grad_fn"] == "MseLossBackward0"
    what = sus["type:torch.Tensor"]["what"]
    assert what.startswith("torch.Tensor (float32, cpu, grad_fn MseLoss"), what
    created = [s["created_at"] for s in sus.values() if s["created_at"]]
    assert created, sus
    assert {"file": monitor.script, "line": loss_line, "function": "Trainer.step"} in created
    cont = [s for k, s in sus.items() if k.startswith("container:")]
    assert cont and cont[0]["holder"]["path"] == "Trainer.losses"
    # The census carried the growing series.
    last = points(monitor)[-1]
    grad = [t for t in last["tensors"] if t["grad_fn"]]
    assert grad and grad[0]["count"] > 100
    assert last["graph"]["nodes"] > last["graph"]["roots"] > 100
    assert last["modules"]["by_class"] == {"Linear": 1}
    assert last["cost_s"] > 0 and last["dropped"] == 0
    assert "torch.Tensor" in last["types"]


HOLDERS = """
    import collections
    import time

    import leakspy
    import leakspy._probe as probe


    class GlobalItem:
        pass


    class ClosureItem:
        pass


    class LocalItem:
        pass


    class AttrItem:
        pass


    history = []


    def make_logger():
        kept = []

        def log(x):
            kept.append(x)

        return log


    class Keeper:
        def __init__(self):
            self.items = []
            self.scores = {}  # numbers only: a dict the collector does not track


    log = make_logger()
    keeper = Keeper()


    def censuses():
        c = probe.S.census if probe.S is not None else None
        return c.n if c is not None else 0


    def main():
        seen = []
        t0 = time.monotonic()
        n = 0
        # Until the census that names the last of the nine (on a loaded
        # machine a fixed time buys fewer censuses).
        while time.monotonic() - t0 < 60 and censuses() < 7:
            history.append(GlobalItem())  # GLOBAL_LINE
            log(ClosureItem())
            seen.append(LocalItem())
            keeper.items.append(AttrItem())
            keeper.scores[n] = n / 2.0
            leakspy.step()
            n += 1
            time.sleep(0.002)
        print("steps", n)


    main()
"""


@pytest.mark.parametrize("python", PLAIN_PYTHONS, ids=lambda p: os.path.basename(os.path.dirname(
    os.path.dirname(p))) if "pyenv" in p else "venv")
def test_holder_kinds_global_closure_local_attribute(monitor, python):
    p = monitor.run(HOLDERS, python=python)
    check_ok(p)
    assert p.stdout.startswith(b"steps ")
    n = int(p.stdout.split()[1])
    hello = monitor.messages("hello")[0]
    assert hello["python"].startswith(subprocess.run(
        [python, "-c", "import sys; print('%d.%d.' % sys.version_info[:2])"],
        stdout=subprocess.PIPE).stdout.decode().strip())
    assert steps(monitor, "manual")[-1] == n
    censuses = points(monitor)
    assert len(censuses) >= 5
    assert all(c["tensors"] is None for c in censuses)  # no torch here
    sus = suspects_by_key(monitor)
    want = {
        "GlobalItem": ("global", "__main__.history", ["GlobalItem", "list", "module"]),
        "ClosureItem": ("closure", "make_logger.<locals>.log.<kept>",
                        ["ClosureItem", "list", "cell", "function"]),
        "LocalItem": ("local", "main:seen", ["LocalItem", "list", "frame"]),
        "AttrItem": ("attribute", "Keeper.items", ["AttrItem", "list", "Keeper"]),
    }
    for cls, (kind, path, chain) in want.items():
        s = sus.get("type:__main__." + cls)
        assert s is not None, sorted(sus)
        h = s["holder"]
        assert (h["kind"], h["path"], h["chain"]) == (kind, path, chain), s
        assert h["file"] == monitor.script
        assert s["created_at"] is not None and s["created_at"]["function"] == "main", s
    g = sus["type:__main__.GlobalItem"]
    assert g["holder"]["line"] == line_of(monitor.script, "history = []")
    assert g["created_at"]["line"] == line_of(monitor.script, "GLOBAL_LINE")
    attr = sus["type:__main__.AttrItem"]
    assert attr["holder"]["line"] == line_of(monitor.script, "self.items = []")
    # The lists themselves are followed by id, with the same holders; so is
    # the untracked dict of numbers.
    paths = sorted(s["holder"]["path"] for k, s in sus.items() if k.startswith("container:"))
    assert paths == sorted([p for _, p, _ in want.values()] + ["Keeper.scores"])
    # The growing list is a series of the census: one id, rising lengths.
    cid = [k for k, s in sus.items() if s["holder"]["path"] == "__main__.history"
           and k.startswith("container:")][0][len("container:"):]
    lens = [c["len"] for cen in censuses for c in cen["containers"] if str(c["id"]) == cid]
    assert len(lens) >= 2 and lens == sorted(lens)
    # Where its series starts (the first rise the probe counts, and again
    # where a pause restarts it), the census also gives the length it was
    # counted from, for the report to fit.
    entries = [[c for c in cen["containers"] if str(c["id"]) == cid] for cen in censuses]
    starts = [i for i, e in enumerate(entries) if e and "prev" in e[0]]
    assert starts and starts[0] >= 2, entries
    for i in starts:
        assert entries[i][0]["prev"] < entries[i][0]["len"], entries
        if entries[i - 1]:
            assert entries[i][0]["prev"] == entries[i - 1][0]["len"], entries
    # Nothing else was taken for a leak.
    assert set(k.split(":")[0] for k in sus) <= {"type", "container"}
    assert len(sus) == 9, sorted(sus)


def test_a_bounded_deque_that_fills_is_no_suspect(monitor):
    p = monitor.run("""
        import collections, time
        import leakspy

        class Transition:
            def __init__(self, i):
                self.i = i

        buffer = collections.deque(maxlen=600)
        # Steps, not seconds (about 4 s on an idle machine): a busy one
        # stretches the run, and the buffer still fills before it ends.
        for i in range(1300):
            buffer.append(Transition(i))  # fills over 600 steps, then flat
            leakspy.step()
            time.sleep(0.003)
        print(len(buffer))
    """)
    check_ok(p)
    assert p.stdout == b"600\n"
    censuses = points(monitor)
    counts = [c["types"].get("__main__.Transition") for c in censuses]
    assert len(counts) >= 8 and counts[-1] == 600, json.dumps(counts)
    assert counts.index(600) >= 4  # it rose over several censuses before it was full
    assert monitor.messages("suspect") == [], json.dumps(monitor.messages("suspect"))


def test_a_bounded_deque_that_fills_is_reported_with_its_bound_weight_and_holder(monitor):
    p = monitor.run("""
        import collections, time
        import leakspy

        class Buffer:
            def __init__(self):
                self.items = collections.deque(maxlen=1_000_000)

        buf = Buffer()
        for i in range(1300):  # steps, not seconds: about 4 s on an idle machine
            for _ in range(8):
                buf.items.append((b"x" * 2048, float(i)))  # never full in this run
            leakspy.step()
            time.sleep(0.003)
        print("ok")
    """)
    check_ok(p)
    censuses = points(monitor)
    # Not a growing container: its own report, from its first rise on.
    assert not any(c["type"] == "deque" for cen in censuses for c in cen["containers"])
    entries = [cen["bounded"][0] for cen in censuses if cen.get("bounded")]
    assert len(entries) >= 3, json.dumps(censuses)
    lens = [e["len"] for e in entries]
    assert lens == sorted(lens) and lens[0] < lens[-1]
    assert all(e["maxlen"] == 1_000_000 and e["type"] == "deque" for e in entries)
    # A tuple (56 B), its bytes (2,081 B) and its float (24 B).
    assert all(2100 <= e["item_bytes"] <= 2300 for e in entries), entries
    # Holding more than a MiB, it was named once, and said from then on.
    named = [e["holder"] for e in entries if "holder" in e]
    assert named and named[-1]["path"] == "Buffer.items", entries
    assert monitor.messages("suspect") == [], json.dumps(monitor.messages("suspect"))


@needs_torch
def test_the_probes_own_search_never_runs_under_its_tracemalloc(monitor):
    # Creation sites are looked up with tracemalloc, which makes every
    # allocation 50-100 times slower: the probe's own holder searches must
    # be over before it starts. A DQN whose replay buffer (a bounded deque)
    # passed a MiB as its logged Q-values were first named had the buffer's
    # holder searched under tracing: 16 s of the probe's work, and the
    # job's steps stalled from 2 ms to 280 ms. Here a new buffer passes a
    # MiB every 20 steps, so that censuses which name a leak's holder also
    # have a buffer to name.
    p = monitor.run("""
        import collections, time, tracemalloc
        import torch
        import leakspy._explain as explain

        searched = []
        search = explain.attribute_steps

        def watched(*args, **kwargs):
            pieces = search(*args, **kwargs)
            while True:
                searched.append(tracemalloc.is_tracing())
                try:
                    piece = next(pieces)
                except StopIteration as e:
                    return e.value
                yield piece

        explain.attribute_steps = watched

        model = torch.nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        losses = []
        buffers = []
        n = 0
        t0 = time.monotonic()
        # 1,500 steps at least (about 5 s on an idle machine; a busy one
        # stretches them), and until a creation site was looked up.
        import leakspy._probe as probe
        while n < 1500 or (not any(m.get("created_at") for m in probe.S.sent.values())
                           and time.monotonic() - t0 < 60):
            if n % 20 == 0:
                buffers.append(collections.deque(maxlen=10000))
                del buffers[:-4]
            for b in buffers:
                b.append(bytes(16384))  # a buffer passes a MiB in 64 steps
            loss = model(torch.randn(16, 8)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss)
            time.sleep(0.002)
            n += 1
        print(len(searched), sum(searched))
    """, env=monitor.env(LEAKSPY_PROBE_BUDGET="1.0"), timeout=120)
    check_ok(p)
    pieces, traced = map(int, p.stdout.split())
    censuses = points(monitor)
    assert any(c.get("bounded") for c in censuses), censuses
    assert any(s["created_at"] for s in monitor.messages("suspect")), suspects_by_key(monitor)
    assert pieces > 0 and traced == 0, (pieces, traced)


def test_a_program_that_never_steps_gets_timer_censuses(monitor):
    p = monitor.run("""
        import time
        kept = []
        t0 = time.monotonic()
        while time.monotonic() - t0 < 5.0:
            kept.append(bytearray(10))
            kept.append([0])
            time.sleep(0.001)
        print("ok")
    """, env=monitor.env(LEAKSPY_PROBE_BUDGET="0.2"))
    check_ok(p)
    censuses = points(monitor)
    assert len(censuses) >= 5
    assert all(c["source"] == "timer" and c["step"] is None for c in censuses)
    sus = suspects_by_key(monitor)
    assert any(s["holder"]["path"] == "__main__.kept" for s in sus.values()), sus


CHAIN = """
    import random
    import time
    import torch
    import leakspy
    import leakspy._probe as probe

    w = torch.nn.Parameter(torch.full((8,), 1.0001))

    def piece():
        y = torch.ones(8)
        for _ in range(80):
            y = y * w
        loss = y.sum()  # 82 autograd nodes with the sum and the addition
        loss.backward()  # frees what the graph saved, as training does
        return loss

    def censuses(last):
        # Steps until census `last`, yielding after each census before it:
        # reading the probe's census count fixes the growth between
        # censuses whatever the machine's speed.
        seen = 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60:
            c = probe.S.census
            n = c.n if c is not None else 0
            if n != seen:
                seen = n
                if n >= last:
                    return
                yield
            time.sleep(0.001)
            leakspy.step()

    def train(first, each, last):
        # `total = total + loss`: `first` pieces before the first census,
        # then `each` more after every census, until census `last`.
        total = torch.zeros(())
        for _ in range(first):
            total = total + piece()
        for _ in censuses(last):
            for _ in range(each):
                total = total + piece()
        return total

    # A first step ends the timer's censuses (for programs that never step):
    # none may come while a graph is being built.
    leakspy.step()
"""


@needs_torch
def test_a_graph_that_outgrows_the_walk_between_censuses_is_still_a_suspect(monitor):
    # The census walks at most 100,000 autograd nodes. A loop chaining every
    # step's graph onto a running total (`total = total + loss`) can pass
    # that in three censuses on a fast machine, before the count has risen
    # at RISES comparisons in a row: the rise up to the cap must count.
    # 700 pieces (57,400 nodes) between censuses reach the cap at the third.
    p = monitor.run(textwrap.dedent(CHAIN) + "print(train(0, 700, 4).item() > 0)\n",
                    timeout=120)
    check_ok(p)
    assert p.stdout == b"True\n"
    nodes = [c["graph"]["nodes"] for c in points(monitor)]
    capped = [c["graph"].get("capped", False) for c in points(monitor)]
    assert len(nodes) >= 4 and capped.index(True) == 2, (nodes, capped)
    sus = suspects_by_key(monitor)
    g = sus.get("graph")
    assert g is not None, sorted(sus)
    # Qualified at the third census; a census done in slices has its
    # suspects searched by the next, which runs whole.
    assert g["step"] in (points(monitor)[2]["step"], points(monitor)[3]["step"]), g
    h = g["holder"]
    assert (h["kind"], h["path"]) == ("local", "train:total"), g


@needs_torch
def test_a_chain_past_the_walk_cap_from_the_first_census_is_named_by_its_history(monitor):
    # At the default budget the first census comes seconds into the run: a
    # chained graph has long passed the walk's cap by then, and its node
    # count says nothing more. The history it keeps (sequence numbers from
    # its oldest node to its newest) still grows by every step's nodes.
    # 1,500 pieces (123,000 nodes) before the first census, 20,500 more by
    # each next one.
    p = monitor.run(textwrap.dedent(CHAIN) + "print(train(1500, 250, 5).item() > 0)\n",
                    timeout=120)
    check_ok(p)
    censuses = points(monitor)
    graphs = [c["graph"] for c in censuses]
    assert len(graphs) >= 5 and all(g.get("capped") for g in graphs), graphs
    hist = [g["history"] for g in graphs]
    assert hist == sorted(hist) and hist[0] > 100000, hist
    sus = suspects_by_key(monitor)
    assert "graph" not in sus, sus["graph"]
    g = sus.get("graph.history")
    assert g is not None, sorted(sus)
    # Two rises after the first census: 0 at every census but the first is
    # what a correct loop's history is.
    # (Or the census after, which runs whole when the one that found it
    # was done in slices.)
    assert g["step"] in (censuses[2]["step"], censuses[3]["step"]), (
        g, [c["step"] for c in censuses])
    assert (g["holder"]["kind"], g["holder"]["path"]) == ("local", "train:total"), g
    assert g["what"].startswith("autograd history (root AddBackward0, over 100000 nodes)"), g


@needs_torch
def test_a_big_graph_made_anew_each_step_keeps_no_history(monitor):
    # Every step builds a graph past the walk's cap, of a different size each
    # time, and holds it at the step boundary: big, not growing.
    p = monitor.run(textwrap.dedent(CHAIN) + textwrap.dedent("""
    def train():
        random.seed(0)
        t0 = time.monotonic()
        # (Steps of a graph past the walk's cap take a second or two on a
        # busy machine, and a census done in slices spans several: seven
        # censuses took more than 150 s on a slow one.)
        while time.monotonic() - t0 < 300:
            c = probe.S.census
            if c is not None and c.n >= 7:
                break
            loss = torch.zeros(())
            for _ in range(random.randint(1250, 1500)):
                y = torch.ones(8)
                for _ in range(80):
                    y = y * w
                loss = loss + y.sum()
            loss.backward()
            leakspy.step()
        return loss

    print(train().item() > 0)
    """), timeout=400)
    check_ok(p)
    graphs = [c["graph"] for c in points(monitor)]
    assert len(graphs) >= 6 and all(g.get("capped") for g in graphs), graphs
    # (The first census has no earlier one to tell what outlived it.)
    assert all(g["history"] == 0 for g in graphs[1:]), graphs
    sus = suspects_by_key(monitor)
    assert not set(sus) & {"graph", "graph.history"}, sus


@needs_torch
def test_a_chain_beside_kept_graphs_is_named_by_its_own_holder(monitor):
    # Two leaks of autograd graphs in one loop: every loss kept in a list
    # (many small graphs), and a running total chaining every step to the
    # last (one graph, growing). All graphs together are held by the list;
    # the largest graph, by the total.
    p = monitor.run(textwrap.dedent(CHAIN) + textwrap.dedent("""
    class Trainer:
        def __init__(self):
            self.losses = []
            self.total = torch.zeros(())

        def step(self):
            self.losses.append(piece())
            self.losses.append(piece())
            self.total = self.total + piece()

    # 20 steps after each census (246 nodes each): under the walk's cap.
    trainer = Trainer()
    for _ in censuses(7):
        for _ in range(20):
            trainer.step()
    print(len(trainer.losses) > 0)
    """), env=monitor.env(LEAKSPY_PROBE_BUDGET="0.5"), timeout=120)
    check_ok(p)
    graphs = [c["graph"] for c in points(monitor)]
    assert all(not g.get("capped") for g in graphs), graphs
    largest = [g.get("largest", 0) for g in graphs]  # (no graph at all: none)
    assert largest == sorted(largest) and largest[-1] > largest[0], graphs
    sus = suspects_by_key(monitor)
    assert {"graph", "graph.largest"} <= set(sus), sorted(sus)
    assert sus["graph"]["holder"]["path"] == "Trainer.losses", sus["graph"]
    assert sus["graph.largest"]["holder"]["path"] == "Trainer.total", sus["graph.largest"]
    assert sus["graph.largest"]["what"].startswith(
        "autograd nodes of the largest graph (root AddBackward0"), sus["graph.largest"]


def test_growth_counts_a_rise_into_the_walk_cap():
    from leakspy._census import RISES, Growth

    def feed(series):
        g = Growth()
        out = []
        for v, capped in series:
            g.update({"graph": v}, None, ("graph",) if capped else ())
            out.append("graph" in g.rising())
        return out

    cap = 100000
    # Two rises, the second into the cap: a suspect from then on, while it
    # stays at the cap.
    assert feed([(30000, False), (60000, False), (cap, True), (cap, True), (cap + 2, True)]) == [
        False, False, True, True, True]
    # Only one rise before the cap is not enough; neither is a graph that was
    # at the cap from the first census on, nor one that shrank below it.
    assert feed([(60000, False), (cap, True), (cap, True)]) == [False, False, False]
    assert feed([(cap, True)] * 6) == [False] * 6
    assert feed([(30000, False), (60000, False), (cap, True), (50000, False)]) == [
        False, False, True, False]
    # A graph that never reaches the cap needs RISES rises in a row.
    ups = [(1000 * (i + 1), False) for i in range(RISES + 2)]
    assert feed(ups) == [False] * RISES + [True, True]


def test_a_rise_that_does_not_count_does_not_break_the_run():
    from leakspy._census import RISES, Growth

    def feed(series):
        g = Growth()
        out = []
        for v, tainted in series:
            g.update({"container:1": v}, {"container:1"} if tainted else None)
            out.append("container:1" in g.rising())
        return out

    # A list that grows at every census, with every other census tainted
    # (the probe kept something after the one before): it qualifies after
    # RISES rises that count, not never.
    ups = [(100 * (i + 1), i % 2 == 1) for i in range(2 * RISES + 2)]
    assert feed(ups)[-1] is True, feed(ups)
    # Tainted rises alone never make a suspect, and a fall still breaks it.
    assert feed([(100 * (i + 1), True) for i in range(8)]) == [False] * 8
    assert feed([(100, False), (200, False), (300, True), (250, False), (300, False)]) == [
        False] * 5


def test_a_rare_leaks_instances_are_searched_before_the_programs_own():
    from leakspy._census import Census, Libraries

    class Obj:
        pass

    live = [Obj() for _ in range(40)]  # a live model's parameters
    copies = [Obj() for _ in range(3)]  # one copy's, added a while ago
    c = Census(Libraries(None))
    key = "tensors:cpu/float32/leaf"
    everything = live + copies
    # First remembered with the live ones only; the copies came after, and
    # nothing was born between the two last censuses.
    c.survivors_first = {key: set(map(id, live))}
    c.survivors_old = {key: set(map(id, everything))}
    c.survivors = {key: set(map(id, everything))}
    assert c._survivors_first(key, everything) == copies
    # Born between the two last: those first.
    newest = Obj()
    c.survivors = {key: set(map(id, everything + [newest]))}
    assert c._survivors_first(key, everything + [newest]) == [newest]
    # Nothing remembered: the first candidates, as found.
    c.survivors = c.survivors_old = c.survivors_first = {}
    assert c._survivors_first(key, everything)[:3] == live[:3]


def test_the_probes_own_containers_are_never_the_jobs():
    # Each census replaces some of its sets (the keys that rose); a new one
    # often lands at the old one's address, so one left out of the probe's
    # own ids reads as one container of the job that keeps growing.
    from leakspy._census import Census, Libraries

    c = Census(Libraries(None))
    c.growth.update({"type:x.Y": 1.0, "type:x.Z": 1.0})
    c.growth.update({"type:x.Y": 2.0, "type:x.Z": 2.0})
    own = c._own_ids()
    held = [v for v in vars(c.growth).values() if isinstance(v, (set, dict, list))]
    held += [v for v in vars(c).values() if isinstance(v, (set, dict, list))]
    assert held and all(id(v) in own for v in held), [
        (k, type(v).__name__) for k, v in list(vars(c).items()) + list(vars(c.growth).items())
        if isinstance(v, (set, dict, list)) and id(v) not in own]


def test_a_graphs_history_qualifies_after_two_rises():
    from leakspy._census import Growth

    def feed(series):
        g = Growth()
        out = []
        for v in series:
            g.update({"graph.history": v, "type:x.Y": v})
            out.append(sorted(g.rising()))
        return out

    assert feed([120000, 160000, 200000, 240000]) == [
        [], [], ["graph.history"], ["graph.history", "type:x.Y"]]
    # A correct loop's: all it kept at the first census, then nothing older.
    assert feed([120000, 0, 0, 0, 0]) == [[]] * 5


# -- the budget ------------------------------------------------------------------------


@needs_torch
def test_the_probe_keeps_to_its_budget_by_its_own_accounting(monitor):
    budget = 0.1
    p = monitor.run("""
        import sys, time
        import torch
        model = torch.nn.Linear(32, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        # Sized by what the probe did, not by the clock alone: on a busy
        # machine a census costs more and the budget spaces them further
        # apart, so the job trains until three were paid for (6 s at least,
        # 120 s at most).
        probe = sys.modules["leakspy._probe"]
        t0 = time.monotonic()
        def censuses():
            st = probe.S
            return st.census.n if st is not None and st.census is not None else 0
        while time.monotonic() - t0 < 6.0 or (
                censuses() < 3 and time.monotonic() - t0 < 120.0):
            loss = model(torch.randn(64, 32)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        print("done")
    """, env=monitor.env(LEAKSPY_PROBE_BUDGET=str(budget)), timeout=180)
    check_ok(p)
    censuses = monitor.messages("census")
    costs = monitor.messages("cost")
    assert len(censuses) >= 2, len(censuses)
    # One account after each census, and a last one at exit.
    assert len(costs) == len(censuses) + 1, (len(costs), len(censuses))
    last = costs[-1]
    assert last["censuses"] == len(censuses) and last["budget"] == budget
    assert last["probe_s"] > 0 and last["wall_s"] > 6.0
    assert [c["probe_s"] for c in costs] == sorted(c["probe_s"] for c in costs)
    # The probe's work stays within the budget of the job's own time, give or
    # take the one census it may run ahead of it.
    job = last["wall_s"] - last["probe_s"]
    one_census = max(c["cost_s"] for c in censuses)
    assert last["probe_s"] <= budget * job + one_census, (last, one_census)


def test_a_long_pause_does_not_buy_a_burst_of_censuses(monitor):
    p = monitor.run("""
        import time
        import leakspy
        kept = []
        for i in range(20):
            kept.append([i])
            leakspy.step()
            time.sleep(0.05)
        print("paused", flush=True)
        time.sleep(3.0)
        for i in range(300):
            kept.append([i])
            leakspy.step()
        print("done")
    """, env=monitor.env(LEAKSPY_PROBE_BUDGET="0.5"))
    check_ok(p)
    censuses = points(monitor)
    assert censuses and censuses[0]["step"] <= 20, [c["step"] for c in censuses]
    # 3 s at a 50 % budget would pay for dozens of these censuses; the credit
    # holds one, so the 300 quick steps after the pause see one or two.
    after = [c["step"] for c in censuses if c["step"] > 20]
    assert 1 <= len(after) <= 2, [c["step"] for c in censuses]


# -- what the monitor asks: bursts and last looks ------------------------------------------


BURST_SCRIPT = """
    import sys, time
    import torch
    import torch.nn.functional as F


    class Trainer:
        def __init__(self):
            self.model = torch.nn.Linear(16, 1)
            self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
            self.losses = []

        def step(self):
            loss = F.mse_loss(self.model(torch.randn(32, 16)), torch.zeros(32, 1))
            self.opt.zero_grad()
            loss.backward()
            self.opt.step()
            self.losses.append(loss)


    trainer = Trainer()
    t0 = time.monotonic()
    while time.monotonic() - t0 < float(sys.argv[1]):
        trainer.step()
        time.sleep(0.001)
    print("done")
"""


def run_async(monitor, script, args, env):
    """Starts ``script`` under the test's monitor, without waiting for it."""
    path = os.path.abspath(os.path.join(monitor.dir, "..",
                                        os.path.basename(monitor.dir) + "-script.py"))
    with open(path, "w") as f:
        f.write(textwrap.dedent(script))
    monitor.script = path
    return subprocess.Popen([sys.executable, path] + list(args), env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            cwd=os.path.dirname(path))


@needs_torch
def test_a_burst_the_monitor_asks_for_names_the_holder_at_the_default_budget(monitor):
    env = monitor.env(LEAKSPY_PROBE_BUDGET="0.01")
    p = run_async(monitor, BURST_SCRIPT, ["40"], env)
    try:
        assert monitor.wait_for("step", timeout=60) is not None, p.stderr.read()
        monitor.send({"kind": "burst", "reason": "memory grows (test)"})
        # At 1 % the first census would come 10 s in and a holder a minute
        # later; the burst names it from a few censuses in a row.
        sus = monitor.wait_for("suspect", timeout=60)
        assert sus is not None, [m["kind"] for m in monitor.messages()]
        # A bounded burst: it ends, and the probe goes back to its budget.
        end = None
        deadline = time.monotonic() + 60
        while end is None and time.monotonic() < deadline:
            end = next((m for m in monitor.messages("note")
                        if "burst 1 ended" in m["message"]), None)
            time.sleep(0.1)
        assert end is not None, monitor.messages("note")
    finally:
        p.kill()
        p.wait()
    monitor.wait()
    notes = [m["message"] for m in monitor.messages("note")]
    assert any(n.startswith("burst 1: memory grows (test)") for n in notes), notes
    named = [m for m in monitor.messages("suspect")
             if (m["holder"] or {}).get("path") == "Trainer.losses"]
    assert named, suspects_by_key(monitor)
    # The container right under the holder is told by id: the report joins
    # its length series to the holder.
    assert any(m["holder"].get("container_id") for m in named), named
    burst = [c for c in points(monitor) if c.get("burst") == 1]
    assert len(burst) >= 3, points(monitor)
    cost = monitor.messages("cost")[-1]
    assert cost["bursts"] == 1 and 0 < cost["burst_s"] <= cost["probe_s"], cost
    assert set(cost["parts"]) >= {"census", "holders", "messages"}, cost


@needs_torch
def test_no_burst_no_census_in_a_short_run_at_the_default_budget(monitor):
    # The first census waits until the job's time has paid for it: 5 s of a
    # 1 % budget do not pay for one, so a short healthy job pays nothing.
    p = monitor.run(BURST_SCRIPT.replace("self.losses.append(loss)", "pass").replace(
        "float(sys.argv[1])", "5.0"), env=monitor.env(LEAKSPY_PROBE_BUDGET="0.01"))
    check_ok(p)
    assert points(monitor) == [], points(monitor)


def test_a_last_look_when_the_monitor_is_leaving(monitor):
    script = """
        import os, sys, time
        import leakspy
        history = []
        t0 = time.monotonic()
        while time.monotonic() - t0 < 30:
            history.append([0.0] * 20)
            leakspy.step()
            time.sleep(0.002)
    """
    p = run_async(monitor, script, [], monitor.env(LEAKSPY_PROBE_BUDGET="0.3"))
    try:
        deadline = time.monotonic() + 60
        while len(points(monitor)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(points(monitor)) >= 3, monitor.messages()
        monitor.send({"kind": "look"})
        looked = monitor.wait_for("looked", timeout=30)
        assert looked is not None, [m["kind"] for m in monitor.messages()]
    finally:
        p.kill()
        p.wait()
    last = [c for c in monitor.messages("census") if c.get("look") == "detach"]
    assert len(last) == 1, monitor.messages("census")
    # The look names what rose at its last two comparisons.
    sus = suspects_by_key(monitor)
    assert any((m["holder"] or {}).get("path") == "__main__.history" for m in sus.values()), sus


def test_ctrl_c_still_gets_a_last_look_at_exit(monitor):
    # Three censuses: short of what a suspect needs. Ctrl-C
    # (KeyboardInterrupt) ends the program; the traceback keeps its frames,
    # and the last look at exit names what rose at its last comparisons.
    p = monitor.run("""
        import time
        import leakspy
        import leakspy._probe as probe


        class Recorder:
            def __init__(self):
                self.rows = []


        def main():
            rec = Recorder()
            while probe.S.census is None or probe.S.census.n < 3:
                rec.rows.append([0.0] * 20)
                leakspy.step()
                time.sleep(0.002)
            # More of the same, with no step (and so no census) to see it.
            for _ in range(200):
                rec.rows.append([0.0] * 20)
            raise KeyboardInterrupt


        main()
    """, env=monitor.env(LEAKSPY_PROBE_BUDGET="0.3"))
    assert p.returncode != 0 and b"KeyboardInterrupt" in p.stderr, p.stderr.decode()
    exit_looks = [c for c in monitor.messages("census") if c.get("look") == "exit"]
    assert len(exit_looks) == 1, monitor.messages("census")
    named = [m for m in monitor.messages("suspect")
             if (m["holder"] or {}).get("path") == "Recorder.rows"]
    assert named and named[0]["step"] == exit_looks[0]["step"], suspects_by_key(monitor)


@needs_torch
def test_two_optimizers_stepping_together_count_one_iteration(monitor):
    p = monitor.run("""
        import torch
        a, b = torch.nn.Linear(4, 1), torch.nn.Linear(4, 1)
        oa = torch.optim.SGD(a.parameters(), lr=0.1)
        ob = torch.optim.Adam(b.parameters(), lr=0.1)
        for i in range(300):
            for m, o in ((a, oa), (b, ob)):
                o.zero_grad()
                m(torch.randn(8, 4)).pow(2).mean().backward()
                o.step()
            if i % 3 == 0:  # b steps twice now and then: the second, an iteration
                ob.step()
        print("done")
    """)
    check_ok(p)
    assert steps(monitor, "optimizer")[-1] == 300 + 100, steps(monitor, "optimizer")
    assert monitor.messages("cost")[-1]["optimizers"] == 2


# -- resilience ------------------------------------------------------------------------


SCRIPT_WITH_OUTPUT = """
    import sys, time
    import leakspy
    kept = []
    t0 = time.monotonic()
    i = 0
    while time.monotonic() - t0 < 1.0:
        kept.append([i])
        leakspy.step()
        if i % 50 == 0:
            print("line", i // 50)
        i += 1
        time.sleep(0.002)
    print("end", file=sys.stderr)
    sys.exit(0)
"""


def test_the_monitor_hanging_up_does_not_disturb_the_job():
    ref = Monitor()
    gone = Monitor(hang_up_after=2)
    try:
        before = ref.run(SCRIPT_WITH_OUTPUT, env=ref.env(probe=False))
        after = gone.run(SCRIPT_WITH_OUTPUT)
        assert after.returncode == 0
        assert after.stderr == b"end\n"
        lines = after.stdout.splitlines()
        assert lines == [b"line %d" % i for i in range(len(lines))]
        assert abs(len(lines) - len(before.stdout.splitlines())) <= 3  # same pace
        assert gone.messages("hello")
    finally:
        ref.close()
        gone.close()


def test_a_forked_child_says_hello_on_its_own_connection(monitor):
    p = monitor.run("""
        import os, time
        import leakspy
        for i in range(5):
            leakspy.step()
        pid = os.fork()
        if pid == 0:
            for i in range(3):
                time.sleep(0.12)  # past the probe's step coalescing (0.1 s): os._exit skips its flush
                leakspy.step()
            os._exit(0)
        os.waitpid(pid, 0)
        leakspy.step()
        print(os.getpid(), pid)
    """)
    check_ok(p)
    parent, child = map(int, p.stdout.split())
    hellos = {h["pid"]: h for h in monitor.messages("hello")}
    assert set(hellos) == {parent, child}
    assert hellos[parent]["forked"] is False
    assert hellos[child]["forked"] is True and hellos[child]["ppid"] == parent
    assert steps(monitor, "manual", pid=child)[-1] == 3
    assert steps(monitor, "manual", pid=parent)[-1] == 6
    # Each process on a connection of its own.
    with monitor.lock:
        conn_of = {m["pid"]: n for n, m in monitor.msgs}
    assert conn_of[parent] != conn_of[child]
    assert monitor.messages("census", pid=child) == []


@needs_torch
def test_dataloader_workers_have_their_own_channel_and_the_parent_keeps_its(monitor):
    p = monitor.run("""
        import time
        import torch
        import leakspy
        from torch.utils.data import DataLoader, Dataset

        class Slow(Dataset):
            def __len__(self):
                return 32
            def __getitem__(self, i):
                time.sleep(0.1)  # workers live past the probe's first second
                return torch.ones(3) * i

        if __name__ == "__main__":
            for epoch in range(2):
                n = sum(1 for _ in DataLoader(Slow(), batch_size=8, num_workers=2,
                                               multiprocessing_context="fork"))
                leakspy.step()
            print(n)
    """)
    check_ok(p)
    assert p.stdout == b"4\n"
    hellos = monitor.messages("hello")
    parent = [h for h in hellos if not h["forked"]]
    workers = [h for h in hellos if h["forked"]]
    assert len(parent) == 1 and workers, hellos
    # Each worker says who it is to the job, on a connection of its own;
    # the parent's connection was not used by them (its lines all parse,
    # its steps arrive).
    assert all(h["ppid"] == parent[0]["pid"] for h in workers)
    assert {h["role"] for h in workers} <= {"DataLoader worker 1 of 2",
                                           "DataLoader worker 2 of 2"}
    with monitor.lock:
        conn_of = {}
        for n, m in monitor.msgs:
            conn_of.setdefault(m["pid"], set()).add(n)
    assert all(len(c) == 1 for c in conn_of.values())
    assert len(set().union(*conn_of.values())) == len(conn_of)
    assert monitor.bad == []
    assert steps(monitor, "manual", pid=parent[0]["pid"])[-1] == 2


FORKED_CHILD_SCRIPT = """
    import multiprocessing as mp, os, sys, time

    class Cache:
        def __init__(self):
            self.items = {}

    def work(seconds, keep):
        c = Cache()
        t0 = time.time()
        i = 0
        while time.time() - t0 < seconds:
            if keep:
                c.items[i] = [float(i)] * 50  # KEPT
            i += 1
            time.sleep(0.002)

    if __name__ == "__main__":
        seconds, keep = float(sys.argv[1]), sys.argv[2] == "keep"
        child = mp.get_context("fork").Process(target=work, args=(seconds, keep))
        child.start()  # STARTED
        child.join()
        print(os.getpid(), child.pid)
"""


def conn_of(monitor, pid):
    """The connection a process said hello on."""
    with monitor.lock:
        return next(n for n, m in monitor.msgs if m["kind"] == "hello" and m["pid"] == pid)


def test_a_forked_child_gets_a_probe_of_its_own(monitor):
    p = run_async(monitor, FORKED_CHILD_SCRIPT, ["12", "keep"], monitor.env())
    try:
        parent = monitor.wait_for("hello", forked=False, timeout=60)
        hello = monitor.wait_for("hello", forked=True, timeout=60)
        assert parent is not None and hello is not None, p.stderr.read()
        child = hello["pid"]
        # The monitor sees the child's own memory grow: it asks that child.
        monitor.send({"kind": "burst", "reason": "memory grows (test)"}, conn_of(monitor, child))
        out, err = p.communicate(timeout=90)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 0, err
    assert list(map(int, out.split())) == [parent["pid"], child]
    assert hello["forked"] is True and hello["ppid"] == parent["pid"]
    assert hello["role"] == "multiprocessing ForkProcess-1"
    assert hello["started_at"]["line"] == line_of(monitor.script, "# STARTED")
    # Its own censuses on its own budget (the parent, waiting in join(),
    # has none), and the holder of what grows in it.
    assert points(monitor, pid=child)
    assert all(c["role"] == "multiprocessing ForkProcess-1" for c in points(monitor, pid=child))
    held = [s for s in monitor.messages("suspect", pid=child)
            if s["holder"]["path"] == "Cache.items"]
    assert held, monitor.messages("suspect", pid=child)


def test_a_forked_child_nobody_asks_takes_no_census(monitor):
    # A census lists every object the child shares with its parent and writes
    # each reference count: the kernel would copy those pages. Unasked (its
    # memory did not grow), the child takes none, though its budget allows.
    p = monitor.run(FORKED_CHILD_SCRIPT.replace("sys.argv[1]", "'6'").replace(
        "sys.argv[2]", "'flat'"))
    check_ok(p)
    parent, child = map(int, p.stdout.split())
    assert monitor.wait_for("hello", pid=child, timeout=1) is not None
    assert monitor.messages("census", pid=child) == []
    assert [m for m in monitor.messages("cost", pid=child) if m.get("censuses")] == []


def test_a_forked_child_that_execs_says_nothing(monitor):
    p = monitor.run("""
        import subprocess, sys
        import leakspy
        leakspy.step()
        # preexec_fn makes subprocess run the fork hooks in the child
        out = subprocess.run(["/bin/echo", "hi"], preexec_fn=lambda: None,
                             stdout=subprocess.PIPE).stdout
        leakspy.step()
        print(out.decode().strip())
    """)
    check_ok(p)
    assert p.stdout == b"hi\n"
    assert len(monitor.messages("hello")) == 1 and monitor.conns == 1


# -- the channel ------------------------------------------------------------------------


def test_a_full_socket_buffers_then_drops_whole_messages():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ch = Channel("unused")
    a.setblocking(False)
    ch.sock = a
    payload = "x" * 5000
    t = time.monotonic()
    for i in range(2000):  # 10 MB, nobody reading
        assert ch.send({"kind": "note", "i": i, "p": payload})
    assert time.monotonic() - t < 5
    assert 0 < len(ch.buf) <= MAX_BUFFER
    dropped = ch.take_dropped()
    assert dropped > 0 and ch.take_dropped() == 0
    # Whatever arrives is whole lines, in order, with a gap where drops were.
    a.setblocking(True)
    got = []
    reader = b.makefile("rb")

    def read():
        for line in reader:
            got.append(json.loads(line)["i"])

    r = threading.Thread(target=read)
    r.start()
    ch.drain(5.0)
    ch.close()
    r.join(5)
    assert got == sorted(got) and len(got) + dropped == 2000
    b.close()


def test_a_closed_peer_kills_the_channel_quietly():
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ch = Channel("unused")
    a.setblocking(False)
    ch.sock = a
    b.close()
    assert ch.send({"kind": "note"}) is False
    assert ch.dead and ch.send({"kind": "note"}) is False


@needs_torch
def test_a_census_of_many_tensors_is_done_in_slices_between_steps(monitor):
    p = monitor.run("""
        import time
        import torch
        import leakspy

        kept = [torch.zeros(2) for _ in range(30000)]
        t0 = time.monotonic()
        while time.monotonic() - t0 < 4.0:
            kept.append(torch.zeros(2))
            leakspy.step()
            time.sleep(0.002)
        print(len(kept))
    """)
    check_ok(p)
    censuses = points(monitor)
    assert censuses, monitor.messages()
    # Tens of thousands of tensors are looked at a few thousand at a time,
    # the job stepping in between; what is counted is what was alive when
    # the census started.
    slices = [c["slices"] for c in censuses]
    assert sum(n >= 2 for n in slices) >= len(slices) - 1, slices
    assert all(c["pause_s"] <= c["cost_s"] for c in censuses)
    counts = [sum(g["count"] for g in c["tensors"]) for c in censuses]
    assert counts == sorted(counts) and counts[0] >= 30000, counts


@needs_torch
def test_a_leak_found_over_slices_is_named_without_a_whole_census(monitor):
    # Enough tensors that every census takes several slices; the holder
    # search of the census that finds the leak runs in slices too, between
    # steps, instead of a census in one piece after it.
    p = monitor.run("""
        import time
        import torch
        import leakspy

        ballast = [torch.zeros(2) for _ in range(30000)]
        w = torch.ones(4, requires_grad=True)

        class Trainer:
            def __init__(self):
                self.losses = []

        trainer = Trainer()
        t0 = time.monotonic()
        while time.monotonic() - t0 < 6.0:
            trainer.losses.append((w * 2.0).sum())  # kept with its graph
            leakspy.step()
            time.sleep(0.002)
        print(len(ballast) > 0)
    """)
    check_ok(p)
    sus = suspects_by_key(monitor)
    held = {k: m["holder"]["path"] for k, m in sus.items()}
    assert "Trainer.losses" in held.values(), held
    assert all(path in ("Trainer.losses", None) for path in held.values()), held
    slices = [c["slices"] for c in points(monitor)]
    assert len(slices) >= 4 and all(n >= 2 for n in slices), slices
    costs = monitor.messages("cost")
    assert costs and all("pause_s" in c for c in costs), costs


@needs_torch
@pytest.mark.parametrize("first, update", [
    ("torch.zeros(0)", "self.history = torch.cat([self.history, x.sum().view(1)])"),  # rebound
    ("torch.zeros(1)", "self.history += x.sum().view(1)"),  # updated in place
])
def test_a_chain_found_over_slices_is_named_by_its_head_now_without_a_whole_census(
        monitor, first, update):
    # The head moves on every step: the one the census listed is no longer
    # the head by the time its slices end. Updated in place, it is still
    # the head; rebound, the head now is the tensor alive whose graph
    # reaches the listed one. Either is searched at once, so the holder is
    # named before any census runs in one piece (which would pause the job
    # for all of its tensors).
    p = monitor.run("""
        import time
        import torch
        import leakspy

        ballast = [torch.zeros(2) for _ in range(30000)]
        w = torch.ones(4, requires_grad=True)

        class Normalizer:
            def __init__(self):
                self.history = %s

            def update(self, x):
                %s

        norm = Normalizer()
        t0 = time.monotonic()
        while time.monotonic() - t0 < 6.0:
            norm.update(w * 2.0)
            leakspy.step()
            time.sleep(0.002)
        print(len(ballast) > 0)
    """ % (first, update))
    check_ok(p)
    order = [m for m in monitor.messages() if m["kind"] in ("census", "suspect")
             and m.get("look") != "exit"]
    named = [i for i, m in enumerate(order) if m["kind"] == "suspect"
             and m["key"] in ("graph.largest", "graph.history")
             and (m.get("holder") or {}).get("path") == "Normalizer.history"]
    assert named, monitor.messages("suspect")
    before = [m["slices"] for m in order[:named[0]] if m["kind"] == "census"]
    assert before and all(n >= 2 for n in before), before
    # (The count of all nodes rises with it: no holder of its own, or the
    # chain's, found in slices.)
    held = {m["holder"]["path"] for m in suspects_by_key(monitor).values()}
    assert held - {None, ""} == {"Normalizer.history"}, held


@needs_torch
def test_the_head_of_a_chain_now_is_found_from_its_head_a_few_steps_ago():
    import torch
    from leakspy._probe import _grad_fns, _heads_reaching

    w = torch.ones(4, requires_grad=True)
    history = torch.zeros(0)
    for _ in range(10):
        history = torch.cat([history, (w * 2.0).sum().view(1)])
    fns = _grad_fns([history])
    for _ in range(20):
        history = torch.cat([history, (w * 2.0).sum().view(1)])
    heads = _heads_reaching(fns)
    assert any(h is history for h in heads), heads
    # The listed head itself, still alive here, is older: not a head now.
    assert all(h.grad_fn is not fns[0] for h in heads)
    # A graph nothing newer reaches was not rebound: no head to follow.
    other = (w * 3.0).sum()
    assert _heads_reaching(_grad_fns([other])) == []
    del heads, history, fns, other


@needs_torch
def test_a_chain_left_to_a_whole_census_past_the_walk_cap_is_searched_by_its_history():
    # A census in slices left the chain's largest graph to the next one;
    # meanwhile the chain outgrew the walk's cap, so that census measures
    # it by the history it keeps, and searches that. Where all graphs were
    # already named, through a graph other than the biggest (one loss of a
    # list), the chain is still a suspect of its own; through the biggest,
    # it is not.
    import torch
    from leakspy._census import Census, Libraries

    w = torch.ones(3, requires_grad=True)

    def piece():
        # 82 nodes a step, one hop of the chain (a chain as deep as its node
        # count takes the interpreter's stack with it when it is freed).
        y = w * 1.0
        for _ in range(80):
            y = y * w
        return y.sum()

    def whole(graphs_apart):
        c = Census(Libraries(None))
        c.run(want_picks=True, warmup=False)  # a baseline
        chain = w.sum()
        for _ in range(100):
            chain = chain + piece()
        c.run(want_picks=True)
        for _ in range(1300):  # past the walk's cap (100,000 nodes)
            chain = chain + piece()
        c.suspect_keys.add("graph")
        c.graphs_apart = graphs_apart
        found = c.run(want_picks=True, also={"graph.largest"})[1]
        picked = {s[0]: s[3]["objects"] for s in found}
        held = any(o is chain for o in picked.get("graph.history", ()))
        del chain, found, picked
        return held

    assert whole(True)
    assert not whole(False)


@needs_torch
def test_a_chain_left_to_a_whole_census_is_searched_there_though_it_dipped():
    # A census in slices leaves a chain's series to the next one, run
    # whole (its head is rebound every step); that one searches it even
    # where the largest graph came out smaller this time.
    import torch
    from leakspy._census import Census, Libraries

    w = torch.ones(3, requires_grad=True)
    c = Census(Libraries(None))
    c.run(want_picks=True, warmup=False)  # a baseline
    # (Hundreds of steps: larger than any graph another test left alive.)
    chain = w.sum()
    for n in (300, 300, 300, 300):
        for _ in range(n):
            chain = chain + (w * 2.0).sum()
        c.run(want_picks=True)
    assert "graph.largest" in c.growth.rising()
    chain = w.sum()
    for _ in range(1100):  # smaller than at the census before
        chain = chain + (w * 2.0).sum()
    keys = [s[0] for s in c.run(want_picks=True)[1]]
    assert "graph.largest" not in keys, keys
    c.growth.runs["graph.largest"] = [10.0, 20.0, 30.0, 40.0]  # rose again, then dipped
    chain = w.sum()
    for _ in range(1000):
        chain = chain + (w * 2.0).sum()
    found = c.run(want_picks=True, also={"graph.largest"})[1]
    picked = {s[0]: s[3]["objects"] for s in found}
    assert "graph.largest" in picked, sorted(picked)
    assert any(o is chain for o in picked["graph.largest"]), picked["graph.largest"]
    del chain
