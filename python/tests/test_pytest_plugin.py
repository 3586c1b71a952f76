"""The pytest plugin (`leakspy.pytest_plugin`), run through pytester: a test
marked `@pytest.mark.leakspy(...)` has its body repeated by
leakspy.assert_no_leak and fails with the LeakError when it leaks.
"""

import os
import sys
import textwrap
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

PYTHON_DIR = str(Path(__file__).resolve().parents[1])
sys.path.insert(0, PYTHON_DIR)

PLUGIN = ("-p", "leakspy.pytest_plugin", "-p", "no:cacheprovider")


def has_torch():
    try:
        import torch
    except Exception:
        return False
    # A first optimizer imports triton (and ~900 modules) here, not in
    # pytester's inner run: pytester drops what the inner run imported from
    # sys.modules, and nanobind then reports triton's objects as leaked at
    # exit.
    torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    return True


needs_torch = pytest.mark.skipif(not has_torch(), reason="torch is not installed")


@needs_torch
def test_a_leaking_test_fails_with_the_leak_and_a_healthy_one_passes(pytester):
    path = pytester.makepyfile(test_train="""
        import pytest
        import torch
        import torch.nn.functional as F


        class Trainer:
            def __init__(self):
                self.model = torch.nn.Linear(8, 1)
                self.opt = torch.optim.SGD(self.model.parameters(), lr=0.01)
                self.loss_log = []

            def step(self, keep_graph):
                loss = F.mse_loss(self.model(torch.randn(16, 8)), torch.randn(16, 1))
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
                self.loss_log.append(loss if keep_graph else loss.item())
                if not keep_graph:
                    del self.loss_log[:-10]


        @pytest.fixture
        def trainer():
            return Trainer()


        @pytest.mark.leakspy(steps=60, warmup=5, censuses=10)
        def test_leaky(trainer):
            trainer.step(keep_graph=True)


        @pytest.mark.leakspy(steps=60, warmup=5, censuses=10)
        def test_healthy(trainer):
            trainer.step(keep_graph=False)
    """)
    lines = path.read_text().splitlines()
    loss_line = 1 + next(i for i, t in enumerate(lines) if "loss = F.mse_loss" in t)
    log_line = 1 + lines.index("        self.loss_log = []")
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        "*leakspy.LeakError: test_leaky leaks: 1 holder grows with every call "
        "(calls 6-60 judged, 10 censuses)",
        "*1. Tensor +1.0/call (grad_fn=MseLossBackward0; each keeping * autograd nodes; "
        "cpu float32, +4 B/call) held by Trainer.loss_log (list)",
        "*made at test_train.py:%d in Trainer.step; Trainer.loss_log is set at "
        "test_train.py:%d" % (loss_line, log_line),
        "FAILED test_train.py::test_leaky - leakspy.LeakError: *",
    ])
    assert "test_healthy" not in out.split("short test summary info")[-1]


def test_the_body_runs_steps_times_and_fixtures_are_set_up_once(pytester):
    pytester.makepyfile(test_counts="""
        import pytest

        counts = {"setup": 0, "teardown": 0, "body": 0, "plain": 0}


        @pytest.fixture
        def resource():
            counts["setup"] += 1
            yield object()
            counts["teardown"] += 1


        @pytest.mark.leakspy(steps=37, warmup=4, censuses=6)
        def test_marked(resource, tmp_path):
            counts["body"] += 1
            assert tmp_path.is_dir()


        def test_plain():
            counts["plain"] += 1


        def test_zz_counts():
            assert counts == {"setup": 1, "teardown": 1, "body": 37, "plain": 1}
    """)
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(passed=3)


def test_what_a_fixture_keeps_is_named_by_the_fixture(pytester):
    path = pytester.makepyfile(test_fixture="""
        import pytest


        class Record:
            pass


        @pytest.fixture
        def history():
            return []


        @pytest.mark.leakspy(steps=40, warmup=4, censuses=8)
        def test_keeps(history):
            history.append(Record())
    """)
    line = 1 + path.read_text().splitlines().index("    history.append(Record())")
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*1. Record +1.0/call held by fixture 'history' (list)",
        "*made at test_fixture.py:%d in test_keeps" % line,
    ])


def test_an_exception_in_the_body_fails_the_test_as_it_is(pytester):
    pytester.makepyfile(test_boom="""
        import pytest

        calls = []


        @pytest.mark.leakspy(steps=50, warmup=5, censuses=8)
        def test_boom():
            calls.append(None)
            assert len(calls) < 7, "failed at call %d" % len(calls)
    """)
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*AssertionError: failed at call 7*"])
    assert "LeakError" not in result.stdout.str()


@pytest.mark.parametrize("marker, message", [
    ("leakspy(steps=3)", "steps (3) must be greater than warmup (20)"),
    ("leakspy(50, 5, 2)", "takes at most 2 positional arguments (steps, warmup), got 3"),
    ("leakspy(step=50)", "unknown argument 'step' (known: steps, warmup, censuses, "
                         "creation_sites)"),
    ("leakspy(50, steps=60)", "steps given twice"),
])
def test_wrong_marker_arguments_fail_the_test_with_a_clear_message(pytester, marker, message):
    pytester.makepyfile(test_bad="""
        import pytest

        calls = []


        @pytest.mark.%s
        def test_bad():
            calls.append(None)


        def test_not_called():
            assert calls == []
    """ % marker)
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(failed=1, passed=1)
    result.stdout.fnmatch_lines(["*@pytest.mark.leakspy on test_bad.py::test_bad: " + message])


def test_async_tests_are_refused(pytester):
    pytester.makepyfile(test_async="""
        import pytest


        @pytest.mark.leakspy(steps=20, warmup=2)
        async def test_a():
            pass
    """)
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*@pytest.mark.leakspy does not support async tests*"])


def test_the_marker_is_registered(pytester):
    result = pytester.runpytest(*(PLUGIN + ("--markers",)))
    result.stdout.fnmatch_lines(["@pytest.mark.leakspy(steps=200, warmup=20, censuses=16, "
                                 "creation_sites=True): run the test body*"])
    pytester.makepyfile(test_strict="""
        import pytest


        @pytest.mark.leakspy(steps=20, warmup=2, censuses=6)
        def test_fine():
            pass
    """)
    result = pytester.runpytest(*(PLUGIN + ("--strict-markers",)))
    result.assert_outcomes(passed=1)


LEAK = """
    import pytest

    kept = []


    class Item:
        pass


    @pytest.mark.leakspy(steps=30, warmup=3, censuses=6)
    def test_leak():
        kept.append(Item())
"""


@pytest.mark.parametrize("how", ["entry point", "entry point and -p", "-p", "-p leakspy",
                                 "entry point and conftest"])
def test_the_plugin_loads_by_entry_point_and_by_name_alone_or_both(pytester, monkeypatch, how):
    # A distribution with the pytest11 entry point the package declares,
    # found by importlib.metadata on PYTHONPATH, as an installed wheel is.
    site = pytester.mkdir("site")
    dist = site / "leakspy_fake-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: leakspy-fake\nVersion: 0.1\n")
    if how != "-p":
        (dist / "entry_points.txt").write_text("[pytest11]\nleakspy = leakspy.pytest_plugin\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([PYTHON_DIR, str(site)]))
    monkeypatch.delenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", raising=False)
    pytester.makepyfile(test_leak=LEAK)
    args = ["-p", "no:cacheprovider"]
    if how in ("entry point and -p", "-p"):
        args += ["-p", "leakspy.pytest_plugin"]
    if how == "-p leakspy":
        args += ["-p", "leakspy"]
    if how == "entry point and conftest":
        pytester.makeconftest('pytest_plugins = ["leakspy.pytest_plugin"]')
    result = pytester.runpytest_subprocess(*args)
    out = result.stdout.str() + result.stderr.str()
    assert "already registered" not in out, out
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*1. Item +1.0/call held by test_leak.kept (list)"])


def test_without_the_plugin_the_marker_does_nothing(pytester):
    pytester.makepyfile(test_leak=textwrap.dedent(LEAK))
    # `-p no:leakspy`: where `scripts/demo.sh` has pip-installed leakspy into
    # this venv, its entry point would load the plugin on its own.
    result = pytester.runpytest("-p", "no:leakspy", "-p", "no:cacheprovider", "-W",
                                "ignore::pytest.PytestUnknownMarkWarning")
    result.assert_outcomes(passed=1)
