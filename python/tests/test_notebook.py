"""The parts of the notebook support that need no kernel: the report as
notebook output, the live line, the magics' arguments, which cell bound a
name, and a watch that cannot start (the code runs on, nothing raised).
The real kernels are in crates/leakspy/tests/notebook_kernel.rs."""

import re
import sys

import pytest

from leakspy import _holders, _ipython, _notebook

DOC = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>t</title><style>
:root{--fg:#000}
body{margin:0}
main{max-width:960px}
h1{font-size:20px}
th,td{padding:5px}
</style></head><body><main>
<header class="verdict leak"><h1>LEAK</h1></header><section id="growth"><h2>What grows</h2></section>
</main></body></html>
"""


def test_report_fragment_scopes_the_style_and_keeps_the_sections():
    frag = _notebook.report_fragment(DOC)
    assert frag.startswith('<div class="leakspy-report"><style>')
    assert "<html" not in frag and "<body" not in frag
    assert '<section id="growth"><h2>What grows</h2></section>' in frag
    css = re.search(r"<style>(.*)</style>", frag, re.S).group(1)
    for rule in css.split("\n"):
        selectors = rule.split("{")[0]
        assert all(s.startswith(".leakspy-report") for s in selectors.split(",")), rule
    assert ".leakspy-report{max-width:960px}" in css
    assert ".leakspy-report th,.leakspy-report td{padding:5px}" in css


def test_live_line_says_steps_memory_and_the_holder():
    st = _notebook._TraceState()
    st.add({"kind": "sample", "t": 0.1, "total": {"rss": 100 << 20}})
    st.add({"kind": "step", "t": 1.0, "step": 10})
    st.add({"kind": "sample", "t": 1.0, "total": {"rss": 101 << 20}})
    # Warm-up (first-step work, a cache filling once): 200 MiB in 50
    # steps and 3 s, left out of the per-step figure as the verdict does.
    st.add({"kind": "step", "t": 4.0, "step": 60})
    st.add({"kind": "sample", "t": 4.0, "total": {"rss": 301 << 20}})
    assert "/step" not in st.line()
    st.add({"kind": "step", "t": 5.0, "step": 160})
    st.add({"kind": "sample", "t": 5.0, "total": {"rss": 401 << 20}})
    st.add({"kind": "census", "t": 5.0})
    st.add({"kind": "suspect", "t": 5.0, "holder": {"path": "__main__.losses"}})
    line = st.line()
    assert line == ("leakspy \u00b7 watching 5 s \u00b7 step 160 (32/s) \u00b7 RSS 401.0 MiB, "
                    "+301.0 MiB since the start (+1.0 MiB/step) \u00b7 1 census \u00b7 "
                    "growing: held by __main__.losses"), line
    assert st.line(final=True).endswith("diagnosis below")


@pytest.mark.parametrize("line,expected", [
    ("watch", ("watch", {})),
    ("watch --budget 0.2 --no-census", ("watch", {"budget": 0.2, "census": False})),
    ("start --budget=0.05", ("start", {"budget": 0.05})),
    ("stop", ("stop", {})),
    ("watch --budget x", (None, {})),
    ("watch --bogus", (None, {})),
    ("", (None, {})),
])
def test_magic_arguments(line, expected):
    assert _notebook._parse(line) == expected


class _Shell(object):
    """What binding_cell asks of IPython: the raw input history and its
    transformer (IPython's own)."""

    def __init__(self, cells):
        from IPython.core.inputtransformer2 import TransformerManager

        self.history_manager = type("H", (), {"input_hist_raw": [""] + cells})()
        self.transform_cell = TransformerManager().transform_cell


def test_the_cell_that_bound_a_name():
    _ipython._CELL_BINDINGS.clear()
    ip = _Shell([
        "import torch\nlosses = []",
        "%matplotlib inline\nfor step, batch in enumerate(data):\n    x = 1",
        "%%leakspy watch\nhistory = []\nlosses = [1]",
        "def f():\n    inner = 1",
    ])
    assert _ipython.binding_cell(ip, "losses") == (3, 3)  # the latest binding; the magic's line counts
    assert _ipython.binding_cell(ip, "history") == (3, 2)
    assert _ipython.binding_cell(ip, "batch") == (2, 2)
    assert _ipython.binding_cell(ip, "torch") == (1, 1)
    assert _ipython.binding_cell(ip, "f") == (4, 1)
    assert _ipython.binding_cell(ip, "inner") == (None, None)


def test_outside_ipython_nothing_is_renamed():
    assert "IPython" not in sys.modules or _ipython.shell() is None
    assert _ipython.global_root("losses", ["Tensor", "list", "module"]) is None
    assert _ipython.display_file("/tmp/x.py") is None
    assert _ipython.display_file("Cell In[3]") == "Cell In[3]"


def test_the_output_history_votes_as_one_holder():
    out = {"kind": "ipython_output", "path": "IPython's output history Out[4]", "container": None,
           "vote": "IPython's output history"}
    other = {"kind": "global", "path": "__main__.x", "container": None}
    roots = [dict(out), dict(out, path="IPython's output history Out[5]"), dict(other)]
    best = _holders._vote(roots)
    assert best["path"] == "IPython's output history Out[4]"
    assert "vote" not in best


def test_the_history_itself_is_named_by_the_entries_it_keeps_most(monkeypatch):
    class Shell(object):
        user_ns = {"Out": {2: "text", 3: 1.5, 5: 2.5, 7: "more", 8: 3.5}}

    monkeypatch.setattr(_ipython, "shell", lambda: Shell())
    # Found as the dict itself (a dict of floats growing): named by its oldest float,
    # the entry its floats' holder is named by, so that both group as one.
    whole = _ipython._root(Shell(), "Out", ["dict", "module"])
    entry = _ipython._root(Shell(), "Out", ["float", "dict", "module"])
    assert whole["path"] == entry["path"] == "IPython's output history Out[3]"
    empty = _ipython._output({}, ["dict", "module"])
    assert empty["path"] == "IPython's output history Out"


def test_a_watch_that_cannot_start_lets_the_code_run(monkeypatch, capsys):
    monkeypatch.setattr(_notebook, "find_binary", lambda: None)
    ran = []
    with _notebook.watch() as w:
        ran.append(1)
    assert ran == [1]
    assert w.report is None and "binary was not found" in w.error
    assert "binary was not found" in capsys.readouterr().err

    @_notebook.watch(budget=2.0)
    def f(x):
        return x + 1

    assert f(1) == 2
    assert "budget must be" in capsys.readouterr().err


def test_errors_of_the_watched_code_pass_through(monkeypatch):
    monkeypatch.setattr(_notebook, "find_binary", lambda: None)
    with pytest.raises(ZeroDivisionError):
        with _notebook.watch(show=False):
            1 / 0


def test_ipython_result_attributes_are_the_output_history(monkeypatch):
    from IPython.core.displayhook import DisplayHook
    from IPython.core.interactiveshell import ExecutionResult

    class Shell(object):
        user_ns = {"Out": {3: 1.5, 4: "x"}}

    monkeypatch.setattr(_ipython, "shell", lambda: Shell())
    hook = DisplayHook.__new__(DisplayHook)
    result = ExecutionResult.__new__(ExecutionResult)
    for owner, name in ((hook, "_"), (hook, "___"), (result, "result")):
        root = _ipython.attribute_root(owner, name, ["float", "ExecutionResult"])
        assert root["kind"] == "ipython_output" and root["path"] == "IPython's output history Out[3]"
        assert "%reset -f out" in root["hint"]
    assert _ipython.attribute_root(result, "info", ["float", "ExecutionResult"]) is None
    assert _ipython.attribute_root(object(), "result", ["float", "object"]) is None


def test_a_ctrl_c_during_the_start_stops_the_cell(monkeypatch):
    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(_notebook, "find_binary", interrupted)
    ran = []
    with pytest.raises(KeyboardInterrupt):
        with _notebook.watch(show=False):
            ran.append(1)
    assert ran == []


def test_a_ctrl_c_while_waiting_for_the_report_kills_the_monitor(tmp_path):
    import subprocess

    class Monitor(subprocess.Popen):
        """A monitor that ignores SIGINT, and a Ctrl-C while it is waited for."""

        interrupted = False

        def poll(self):
            if not self.interrupted:
                self.interrupted = True
                raise KeyboardInterrupt
            return super().poll()

    w = _notebook.Watch(show=False)
    w._dir = str(tmp_path)
    w._proc = proc = Monitor(["sh", "-c", "trap '' INT; sleep 60"], start_new_session=True)
    assert w.stop() is None
    assert "KeyboardInterrupt" in w.error
    assert proc.returncode is not None  # killed and reaped, not left behind
