"""leakspy.assert_no_leak on real training steps (torch on the CPU, numpy,
matplotlib), in this process: each leak must raise LeakError naming what
grows and its holder, each control must pass. The plain-Python cases also
run under the other CPythons found on the machine (no torch there), and one
runs under the probe, the way `leakspy run` starts it.
"""

import collections
import copy
import functools
import gc
import os
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import leakspy  # noqa: E402

torch = pytest.importorskip("torch")
F = torch.nn.functional
np = pytest.importorskip("numpy")

HERE = os.path.abspath(__file__)
PYTHON_DIR = str(Path(__file__).resolve().parents[1])
OTHER_PYTHONS = [
    p
    for p in (
        "/root/.pyenv/versions/3.8.18/bin/python3",
        "/root/.pyenv/versions/3.13.0/bin/python3",
    )
    if os.path.exists(p)
]

# Fewer censuses than the default keep each test at a few seconds; the
# bounded-history control runs with the defaults.
FAST = dict(steps=80, warmup=10, censuses=12)


def line_of(marker):
    with open(HERE) as f:
        for i, text in enumerate(f, 1):
            if marker in text and "line_of(" not in text:
                return i
    raise AssertionError(marker)


def small_net():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))


class Trainer:
    def __init__(self):
        self.model = small_net()
        self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.loss_log = []

    def loss(self):
        x = torch.randn(16, 8)
        y = torch.randn(16, 1)
        loss = F.mse_loss(self.model(x), y)  # LOSS_LINE
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss

    def step(self):
        self.loss_log.append(self.loss())


def leak_of(step, **kw):
    with pytest.raises(leakspy.LeakError) as ei:
        leakspy.assert_no_leak(step, **kw)
    err = ei.value
    assert isinstance(err, AssertionError)
    assert err.report is not None and err.report.leaks
    return str(err), err.report


# -- leaks --------------------------------------------------------------------------


def test_losses_kept_in_a_list_name_the_list_the_graph_and_the_line():
    trainer = Trainer()
    msg, report = leak_of(trainer.step, **FAST)
    first = msg.splitlines()[1]
    assert "Tensor +1.0/call (grad_fn=MseLossBackward0; each keeping" in first, msg
    assert "autograd nodes" in first and first.endswith("held by Trainer.loss_log (list)"), msg
    assert msg.startswith("Trainer.step leaks: 1 holder grows with every call (calls 11-80 "
                          "judged, 12 censuses)"), msg
    assert "made at %s:%d in Trainer.loss" % (os.path.relpath(HERE), line_of("# LOSS_LINE")) in msg
    assert "Trainer.loss_log is set at %s:%d" % (
        os.path.relpath(HERE), line_of("self.loss_log = []")) in msg
    (leak,) = report.leaks
    assert leak.key == "tensors:cpu/float32/grad" and leak.per_call == 1.0
    assert leak.holder["kind"] == "attribute" and leak.holder["path"] == "Trainer.loss_log"
    assert leak.created_at == (HERE, line_of("# LOSS_LINE"), "Trainer.loss")
    # The graph each loss keeps grows with it: nodes per call, more than one.
    also = {k: r for _, r, k in leak.also}
    assert also["graph"] > 1.0 and any(k.startswith("container:") for k in also), leak.also
    assert report.calls == 80 and report.warmup == 10 and len(report.checkpoints) == 12
    assert not tracemalloc.is_tracing()


class Accumulator(Trainer):
    def __init__(self):
        Trainer.__init__(self)
        self.total = 0

    def step(self):
        self.total += self.loss()


def test_total_plus_loss_grows_one_graph():
    acc = Accumulator()
    msg, report = leak_of(acc.step, **FAST)
    (leak,) = report.leaks
    assert leak.key == "graph" and leak.per_call >= 3, msg
    assert "autograd graph nodes +" in msg and "root AddBackward0" in msg, msg
    assert "total += loss" in msg and "held by Accumulator.total" in msg, msg


class Seen(Trainer):
    def __init__(self):
        Trainer.__init__(self)
        self.seen = {}
        self.n = 0

    def step(self):
        self.n += 1
        self.seen["batch-%d" % self.n] = self.loss().item()  # SEEN_LINE


def test_a_dict_with_a_new_key_every_call():
    s = Seen()
    msg, report = leak_of(s.step, **FAST)
    (leak,) = report.leaks
    assert leak.key.startswith("container:") and leak.per_call == 1.0
    assert "dict of float: length +1.0/call held by Seen.seen (dict)" in msg, msg
    assert "made at %s:%d in Seen.step" % (os.path.relpath(HERE), line_of("# SEEN_LINE")) in msg


class Recorder(Trainer):
    def __init__(self):
        Trainer.__init__(self)
        self.history = []

    def step(self):
        self.loss()
        self.history.append(self.model[0].weight.detach().numpy().copy())


def test_numpy_arrays_kept_in_a_list():
    r = Recorder()
    msg, report = leak_of(r.step, **FAST)
    assert "numpy arrays +1.0/call (float32 (16, 8), +512 B/call) held by Recorder.history " \
           "(list)" in msg, msg
    assert report.leaks[0].key == "numpy"


class Snapshots(Trainer):
    def __init__(self):
        Trainer.__init__(self)
        self.snapshots = []

    def step(self):
        self.loss()
        self.snapshots.append(copy.deepcopy(self.model))


def test_deep_copied_models_kept():
    s = Snapshots()
    msg, report = leak_of(s.step, **FAST)
    (leak,) = report.leaks
    assert leak.key == "modules:Sequential", msg
    assert "Sequential (nn.Module) +1.0/call (+644 B of parameters/call) held by " \
           "Snapshots.snapshots (list)" in msg, msg
    # Its layers and parameters are the copies' own, under the same holder.
    assert "Linear (nn.Module) +2.0/call" in msg and "requiring grad +4.0/call" in msg, msg


def test_figures_never_closed():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    trainer = Trainer()

    def step():
        value = trainer.loss().item()
        plt.figure()  # FIGURE_LINE
        plt.plot([value, value])

    try:
        with pytest.warns(RuntimeWarning, match="More than 20 figures"):
            msg, report = leak_of(step, steps=40, warmup=4, censuses=8)
    finally:
        plt.close("all")
    assert len(report.leaks) == 1, msg
    assert "open matplotlib figures +1.0/call held by matplotlib.pyplot (figure never closed: " \
           "plt.close(fig))" in msg, msg
    assert "made at %s:%d" % (os.path.relpath(HERE), line_of("# FIGURE_LINE")) in msg, msg


class CatHistory(Trainer):
    """A history kept with torch.cat: one tensor, a new and larger one every
    call; the count of tensors stays flat, their bytes grow. Adam's state
    (larger tensors of the same group) must not be taken for it."""

    def __init__(self):
        Trainer.__init__(self)
        self.opt = torch.optim.Adam(self.model.parameters())
        self.seen = torch.zeros(0)

    def step(self):
        x = torch.randn(4)
        self.loss()
        self.seen = torch.cat([self.seen, x])  # CAT_LINE


def test_a_torch_cat_history_grows_in_bytes_not_in_count():
    h = CatHistory()
    msg, report = leak_of(h.step, **FAST)
    (leak,) = report.leaks
    assert leak.key == "bytes:tensors:cpu/float32/plain" and leak.per_call == 16.0, msg
    assert "cpu float32 tensors: bytes +16 B/call with a flat count" in msg, msg
    assert "held by CatHistory.seen" in msg, msg
    assert "made at %s:%d in CatHistory.step" % (os.path.relpath(HERE), line_of("# CAT_LINE")) \
        in msg, msg


# -- controls -------------------------------------------------------------------------


class Healthy(Trainer):
    def step(self):
        self.loss_log.append(self.loss().item())
        del self.loss_log[:-5]


def test_a_healthy_training_step_passes():
    report = leakspy.assert_no_leak(Healthy().step, **FAST)
    assert report.leaks == [] and report.growth == {}
    assert report.calls == 80 and len(report.checkpoints) == 12 and report.series > 1000
    assert 0 < report.census_seconds <= report.seconds


class Noisy(Trainer):
    """Tensors of varying sizes every call, the last one kept: counts and
    bytes go up and down, never steadily."""

    def step(self):
        self.loss()
        n = int(torch.randint(1, 4000, ()).item())
        self.last = torch.randn(n)
        scratch = [torch.randn(n // (i + 1)) for i in range(n % 5)]
        del scratch


def test_allocator_noise_is_no_leak():
    report = leakspy.assert_no_leak(Noisy().step, **FAST)
    assert report.leaks == []


@functools.lru_cache(maxsize=16)
def features(k):
    return torch.randn(32) * k


class Cached(Trainer):
    def __init__(self):
        Trainer.__init__(self)
        self.cache = {}
        self.n = 0

    def step(self):
        self.n += 1
        features(self.n % 40)  # evicts: at most 16 alive
        key = self.n % 8
        if key not in self.cache:
            self.cache[key] = torch.randn(64)
        self.loss()


def test_caches_that_fill_once_are_no_leak():
    report = leakspy.assert_no_leak(Cached().step, **FAST)
    assert report.leaks == []


class Bounded(Trainer):
    def __init__(self):
        Trainer.__init__(self)
        self.recent = collections.deque(maxlen=50)

    def step(self):
        self.recent.append(self.loss().detach())


def test_a_bounded_history_that_fills_in_the_judged_calls_is_no_leak():
    # 50 > warmup: the deque grows for 30 judged calls, then stays flat.
    b = Bounded()
    report = leakspy.assert_no_leak(b.step, steps=120, warmup=20)
    assert report.leaks == [] and len(b.recent) == 50
    assert len(report.checkpoints) == 16


class Sawtooth(Trainer):
    """A list emptied every 45 calls: at the last census it is rising again
    (at every interval of the last half but the one with the clearing),
    but below its earlier top."""

    def step(self):
        if len(self.loss_log) == 45:
            del self.loss_log[:]
        self.loss_log.append(self.loss().detach())


def test_a_sawtooth_is_no_leak():
    s = Sawtooth()
    report = leakspy.assert_no_leak(s.step, **FAST)
    assert report.leaks == []
    # Only "it ends above its first half's top" stops it (the rule of every
    # verdict on what grows, `leakspy_report::grows`): its fit rises, and so
    # does its last half.
    assert report.checkpoints == (10, 16, 23, 29, 35, 42, 48, 55, 61, 67, 74, 80)
    assert len(s.loss_log) == 35


class Node:
    def __init__(self, payload):
        self.me = self
        self.payload = payload


class Cyclic(Trainer):
    def step(self):
        loss = self.loss()
        a = Node(loss.detach())
        b = Node([a])
        a.other = b


def test_garbage_cycles_are_no_leak():
    gc.disable()  # only the check's own gc.collect() frees them
    try:
        report = leakspy.assert_no_leak(Cyclic().step, **FAST)
    finally:
        gc.enable()
    assert report.leaks == []


def test_the_same_leak_is_found_when_the_control_around_it_is_fixed():
    # The rule is not blind: the bounded history, made unbounded, leaks.
    b = Bounded()
    b.recent = collections.deque()
    msg, _ = leak_of(b.step, **FAST)
    assert "held by Bounded.recent (deque)" in msg, msg


# -- behaviour -----------------------------------------------------------------------


class Boom(Exception):
    pass


def test_exceptions_from_the_step_propagate_unchanged():
    calls = []
    err = Boom("at call 15")

    def step():
        calls.append(None)
        if len(calls) == 15:
            raise err

    was = tracemalloc.is_tracing()
    with pytest.raises(Boom) as ei:
        leakspy.assert_no_leak(step, steps=40, warmup=5, censuses=8)
    assert ei.value is err and len(calls) == 15
    assert tracemalloc.is_tracing() == was


@pytest.mark.parametrize("kwargs, message", [
    (dict(steps=20, warmup=20), "steps (20) must be greater than warmup (20)"),
    (dict(steps=10, warmup=-1), "warmup must be >= 0"),
    (dict(steps=8, warmup=5), "steps - warmup must be at least 5"),
    (dict(steps=100, warmup=10, censuses=3), "censuses must be at least 6"),
    (dict(steps=100.0), "steps must be an integer"),
    (dict(steps=True), "steps must be an integer"),
])
def test_arguments_are_checked(kwargs, message):
    called = []
    with pytest.raises(ValueError) as ei:
        leakspy.assert_no_leak(lambda: called.append(1), **kwargs)
    assert message in str(ei.value)
    assert called == []


def test_step_must_be_callable():
    with pytest.raises(ValueError, match="step must be callable"):
        leakspy.assert_no_leak(42)


def test_without_the_binary_nothing_runs_and_the_error_says_what_to_do(monkeypatch):
    calls = []
    monkeypatch.setenv("LEAKSPY_BIN", "/nonexistent/leakspy")
    with pytest.raises(RuntimeError, match=r"needs the leakspy binary.*pip install \.") as ei:
        leakspy.assert_no_leak(lambda: calls.append(1), **FAST)
    assert calls == [] and not isinstance(ei.value, AssertionError)


def run_plain(tmp_path, code, python=sys.executable):
    """Runs ``code`` in a fresh interpreter that never imports torch."""
    script = tmp_path / "plain.py"
    script.write_text(textwrap.dedent(code))
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    env.pop("LEAKSPY_PROBE_SOCKET", None)
    p = subprocess.run([python, str(script)], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr.decode()
    return p.stdout.decode().splitlines()


def test_calls_and_censuses_are_spread_evenly(tmp_path):
    out = run_plain(tmp_path, """
        import leakspy
        calls = []
        r = leakspy.assert_no_leak(lambda: calls.append(1) or calls.pop(), steps=47, warmup=3,
                                   censuses=10)
        print(list(r.checkpoints))
        # More censuses than judged calls: one census per call.
        r = leakspy.assert_no_leak(lambda: None, steps=8, warmup=0, censuses=20)
        print(list(r.checkpoints))
    """)
    xs = eval(out[0])
    gaps = [b - a for a, b in zip(xs, xs[1:])]
    assert len(xs) == 10 and xs[0] == 3 and xs[-1] == 47 and max(gaps) - min(gaps) <= 1, xs
    assert eval(out[1]) == list(range(9))


def test_a_running_tracemalloc_is_used_and_left_running(tmp_path):
    # In a process without torch: under tracemalloc every census is ten
    # times slower.
    code = """
        import tracemalloc
        import leakspy

        tracemalloc.start(5)


        class Item:
            pass


        kept = []


        def step():
            kept.append(Item())  # ITEM_LINE


        try:
            leakspy.assert_no_leak(step, steps=60, warmup=5, censuses=8)
        except leakspy.LeakError as e:
            print(str(e).splitlines()[2].strip())
        print(tracemalloc.is_tracing())
    """
    out = run_plain(tmp_path, code)
    line = textwrap.dedent(code).splitlines().index("    kept.append(Item())  # ITEM_LINE") + 1
    assert out == ["made at plain.py:%d in step; __main__.kept is set at plain.py:%d" % (
        line, line - 4), "True"], out


def test_without_creation_sites_nothing_is_traced():
    started = []
    real = tracemalloc.start

    def spy(*a):
        started.append(a)
        return real(*a)

    tracemalloc.start = spy
    try:
        msg, _ = leak_of(Trainer().step, steps=60, warmup=5, censuses=8, creation_sites=False)
    finally:
        tracemalloc.start = real
    assert started == [] and "made at" not in msg
    assert "held by Trainer.loss_log (list)" in msg


def test_importing_leakspy_stays_cheap():
    code = textwrap.dedent("""
        import sys
        import leakspy
        leakspy.step()
        print(sorted(m for m in sys.modules if m.startswith(("leakspy", "torch", "numpy"))))
        f = leakspy.assert_no_leak
        print(issubclass(leakspy.LeakError, AssertionError), "torch" in sys.modules,
              "leakspy._probe" in sys.modules, "assert_no_leak" in dir(leakspy))
    """)
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    env.pop("LEAKSPY_PROBE_SOCKET", None)
    p = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    assert p.returncode == 0, p.stderr.decode()
    assert p.stdout.decode().split("\n")[:2] == ["['leakspy']", "True False False True"]


PURE = """
    import collections
    import functools
    import sys

    import leakspy


    class Record:
        def __init__(self, i):
            self.i = i
            self.items = [i, i]


    class Keeper:
        def __init__(self):
            self.records = []
            self.scores = {}
            self.recent = collections.deque(maxlen=50)
            self.cache = {}
            self.n = 0

        def keep_records(self):
            self.n += 1
            self.records.append(Record(self.n))

        def keep_scores(self):
            self.n += 1
            self.scores["k%d" % self.n] = self.n / 2.0

        def bounded(self):
            self.n += 1
            self.recent.append(Record(self.n))

        def cache_fill(self):
            self.n += 1
            self.cache.setdefault(self.n % 10, Record(self.n))

        def cycles(self):
            a = Record(1)
            b = Record(2)
            a.other, b.other = b, a


    @functools.lru_cache(maxsize=16)
    def lookup(k):
        return Record(k)


    count = [0]


    def lru():
        count[0] += 1
        lookup(count[0] % 40)


    k = Keeper()
    for name, fn in [("records", k.keep_records), ("scores", k.keep_scores),
                     ("bounded", k.bounded), ("cache", k.cache_fill), ("cycles", k.cycles),
                     ("lru", lru)]:
        try:
            leakspy.assert_no_leak(fn, steps=120, warmup=20)
            print(name, "ok")
        except leakspy.LeakError as e:
            print(name, "LEAK", str(e).splitlines()[1].strip())
    print("torch" in sys.modules)
"""


@pytest.mark.parametrize("python", [sys.executable] + OTHER_PYTHONS,
                         ids=lambda p: "venv" if p == sys.executable else os.path.basename(
                             os.path.dirname(os.path.dirname(p))))
def test_plain_python_leaks_and_controls(tmp_path, python):
    out = run_plain(tmp_path, PURE, python)
    assert out == [
        "records LEAK 1. Record +1.0/call held by Keeper.records (list)",
        "scores LEAK 1. dict of float: length +1.0/call held by Keeper.scores (dict)",
        "bounded ok",
        "cache ok",
        "cycles ok",
        "lru ok",
        "False",
    ], out


def test_under_the_probe_the_check_works_and_the_probe_goes_on():
    from test_probe import Monitor, check_ok

    mon = Monitor()
    try:
        p = mon.run("""
            import time
            import torch
            import torch.nn.functional as F
            import leakspy


            class Trainer:
                def __init__(self):
                    self.model = torch.nn.Linear(8, 1)
                    self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
                    self.losses = []

                def step(self):
                    loss = F.mse_loss(self.model(torch.randn(16, 8)), torch.randn(16, 1))
                    self.opt.zero_grad()
                    loss.backward()
                    self.opt.step()
                    self.losses.append(loss)


            t = Trainer()
            try:
                leakspy.assert_no_leak(t.step, steps=60, warmup=5, censuses=8)
                print("no leak")
            except leakspy.LeakError as e:
                print(str(e).splitlines()[1].strip())
            t0 = time.monotonic()
            while time.monotonic() - t0 < 1.0:
                t.step()
                time.sleep(0.002)
        """, env=mon.env(LEAKSPY_PROBE_BUDGET="1.0", LEAKSPY_BIN=os.environ["LEAKSPY_BIN"]),
            timeout=120)
        check_ok(p)
        assert p.stdout.decode().strip().endswith("held by Trainer.losses (list)"), p.stdout
        assert mon.messages("hello") and mon.messages("census"), mon.msgs
        warns = [m for m in mon.messages("note") if m["level"] == "warn"]
        assert warns == []
        # The probe still names the leak itself after the check.
        holders = {m["holder"]["path"] for m in mon.messages("suspect")}
        assert "Trainer.losses" in holders, mon.messages("suspect")
    finally:
        mon.close()
