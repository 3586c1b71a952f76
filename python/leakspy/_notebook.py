"""Watching code in the process that runs it: a notebook cell, a loop.

``leakspy.watch()`` (a context manager and a decorator) and the IPython
magics ``%leakspy watch`` / ``%%leakspy watch`` record the memory of this
process while the watched code runs, with the in-process probe counting
steps and naming what grows and who holds it, then show leakspy's
diagnosis: in a notebook under the cell (the HTML report's sections), else
as text on stderr. A live line under the cell says how it goes meanwhile.

How it joins the running kernel: the kernel starts the monitor (the
``leakspy`` binary, beside this package or on ``PATH``) as
``leakspy attach <its own pid> --probe-handoff FILE``. The monitor samples
the kernel from /proc as for any attached process, and instead of
injecting the probe (ptrace, which a process may not do to its own parent
under Yama's default ``ptrace_scope=1``, nor in many containers) it writes
the probe's socket and settings to FILE; the kernel starts the probe itself
(``_attach.start``), on its main thread, at once. When the watched code
ends, the kernel switches its probe off and sends the monitor SIGINT, which
ends an attached recording with its diagnosis (``--report-json``,
``--report-html``). The monitor never signals or stops the kernel.

Nothing here may harm the kernel: every failure (no binary, a monitor
that dies or hangs, a Ctrl-C while waiting for it) becomes a message under
the cell, the watched code's own exceptions pass through unchanged, and
the kernel's state is left as it was.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

from .__main__ import find_binary

# A watch's budget is `leakspy run`'s unless the user names one (`budget=None`
# passes no --probe-budget, and the monitor's handoff says what it chose): a
# healthy cell pays about 1 %, and a leaking one gets the burst of censuses the
# monitor asks for when it sees memory grow, which names the holder within
# seconds.
# The monitor's start: /proc reads and the probe's folder, under a second
# on an idle machine; generous for a loaded one.
HANDOFF_WAIT_S = 30.0
# The diagnosis of a watched cell: reading the trace back and `check` on the
# files named; seconds at most.
STOP_WAIT_S = 120.0
LIVE_EVERY_S = 1.0
# Outside a notebook and a terminal (logs): one live line this often.
PLAIN_EVERY_S = 10.0

LAST = None  # the last Watch that ended (its report), for code that wants it


def _ipython_shell():
    m = sys.modules.get("IPython")
    if m is None:
        return None
    try:
        return m.get_ipython()
    except Exception:
        return None


def in_notebook():
    """Whether output goes to a notebook (an IPython kernel), not a terminal."""
    ip = _ipython_shell()
    return ip is not None and getattr(ip, "kernel", None) is not None


class Watch(object):
    """Records this process while the code it wraps runs, then shows the
    diagnosis. ``with leakspy.watch(): ...`` or ``@leakspy.watch()``.

    After the block: ``report`` (the diagnosis as the JSON report's dict,
    None when there is none), ``text`` (the text report), ``html`` (the
    HTML report's document), ``trace`` (the trace's path, for ``leakspy
    report``), ``error`` (why there is no report, if so)."""

    def __init__(self, budget=None, census=True, live=True, show=True):
        self.budget = budget
        self.census = census
        self.live = live
        self.show = show
        self.report = None
        self.text = ""
        self.html = None
        self.trace = None
        self.error = None
        self._proc = None
        self._dir = None
        self._log = None
        self._live = None
        self._started = False

    def _settings(self):
        return dict(budget=self.budget, census=self.census, live=self.live, show=self.show)

    # -- use ------------------------------------------------------------------

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False  # the watched code's exception, if any, goes on

    def __call__(self, fn):
        import functools

        settings = self._settings()

        @functools.wraps(fn)
        def watched(*args, **kwargs):
            with Watch(**settings):
                return fn(*args, **kwargs)

        return watched

    # -- start ------------------------------------------------------------------

    def start(self):
        """Starts the monitor and the probe. Never raises: a watch that cannot
        start says why and the code runs unwatched."""
        if self._started:
            return self
        self._started = True
        try:
            self._start()
        except BaseException as e:
            # Nothing left behind (a monitor, the probe), whatever stopped the start.
            self._kill()
            if isinstance(e, KeyboardInterrupt):
                raise  # the user stopped the cell before its code began
            self._give_up("leakspy could not start watching (%s: %s); the code runs unwatched"
                          % (type(e).__name__, e))
        return self

    def _start(self):
        try:
            budget = None if self.budget is None else float(self.budget)
        except (TypeError, ValueError):
            budget = -1.0
        if budget is not None and not (0.0 < budget <= 1.0):
            self._give_up("leakspy.watch: budget must be a fraction of the time in (0, 1], "
                          "got %r; the code runs unwatched" % (self.budget,))
            return
        binary = find_binary()
        if binary is None:
            self._give_up("leakspy: the leakspy binary was not found beside the leakspy "
                          "package, at $LEAKSPY_BIN, nor on PATH (install leakspy with its binary into this "
                          "environment: `pip install .` in a leakspy checkout); "
                          "the code runs unwatched")
            return
        self._dir = tempfile.mkdtemp(prefix="leakspy-watch-")
        join = os.path.join
        handoff = join(self._dir, "handoff.json")
        self.trace = join(self._dir, "trace.jsonl")
        cmd = [binary, "attach", str(os.getpid()), "--probe-handoff", handoff,
               "--trace", self.trace, "--report-json", join(self._dir, "report.json"),
               "--report-html", join(self._dir, "report.html"),
               "--quiet"]
        if budget is not None:
            cmd += ["--probe-budget", repr(budget)]
        if not self.census:
            cmd.append("--no-census")
        self._log = open(join(self._dir, "leakspy.log"), "wb")
        # Its own session: a Ctrl-C meant for this process (a terminal's)
        # must not stop the recording before the diagnosis.
        self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._log,
                                      stderr=self._log, close_fds=True,
                                      start_new_session=True)
        deadline = time.monotonic() + HANDOFF_WAIT_S
        while not os.path.exists(handoff):
            if self._proc.poll() is not None:
                self._give_up("leakspy could not start watching: %s" % self._log_text().strip())
                return
            if time.monotonic() > deadline:
                self._kill()
                self._give_up("leakspy could not start watching: the monitor did not start "
                              "within %d s; the code runs unwatched" % HANDOFF_WAIT_S)
                return
            time.sleep(0.02)
        with open(handoff) as f:
            settings = json.load(f)
        from . import _attach

        _attach.start(settings["socket"], settings["budget"], settings["census"])
        if self.live and self.show:
            self._live = _Live(self.trace)
            self._live.begin()

    # -- stop ------------------------------------------------------------------

    def stop(self):
        """Ends the recording and shows the diagnosis. Never raises."""
        global LAST
        try:
            self._stop()
        except BaseException as e:  # a Ctrl-C while waiting for the report included
            self._kill()
            self.error = self.error or "the report was not made (%s)" % type(e).__name__
        LAST = self
        if self.show:
            try:
                self._show()
            except Exception:
                pass
        return self.report

    def _stop(self):
        # The monitor stays in self._proc until it has exited: an interrupt
        # while waiting for it (stop()'s handler) kills it then.
        proc = self._proc
        if self._live is not None:
            self._live.end()
        if proc is None:
            return
        from . import _attach

        _attach.stop()
        try:
            proc.send_signal(signal.SIGINT)
        except OSError:
            pass
        deadline = time.monotonic() + STOP_WAIT_S
        while proc.poll() is None:
            if time.monotonic() > deadline:
                self._kill()
                self.error = "the monitor did not finish its report within %d s" % STOP_WAIT_S
                return
            time.sleep(0.05)
        self._proc = None
        self.text = self._log_text()
        self._close_log()
        join = os.path.join
        try:
            with open(join(self._dir, "report.json")) as f:
                self.report = json.load(f)
        except Exception as e:
            self.error = "no report (%s); the monitor said: %s" % (e, self.text.strip()[-2000:])
        try:
            with open(join(self._dir, "report.html"), encoding="utf-8") as f:
                self.html = f.read()
        except Exception:
            self.html = None

    def _close_log(self):
        log, self._log = self._log, None
        if log is not None:
            try:
                log.close()
            except Exception:
                pass

    def _kill(self):
        proc, self._proc = self._proc, None
        if proc is not None:
            try:
                proc.kill()
                proc.wait(5)
            except Exception:
                pass
        self._close_log()
        try:
            from . import _attach

            _attach.stop()
        except Exception:
            pass

    def _log_text(self):
        if self._dir is None:
            return ""
        try:
            if self._log is not None:
                self._log.flush()
            with open(os.path.join(self._dir, "leakspy.log"), encoding="utf-8",
                      errors="replace") as f:
                return f.read()
        except Exception:
            return ""

    def _give_up(self, message):
        self.error = message
        self._proc = None
        self._close_log()
        if self.show:
            _say(message)

    # -- show ------------------------------------------------------------------

    def _show(self):
        if self.report is None and self.error is None:
            return
        if self.report is None:
            _say("leakspy: %s" % self.error)
            return
        if in_notebook():
            from IPython.display import display

            bundle = {"text/plain": self.text}
            if self.html:
                bundle["text/html"] = report_fragment(self.html)
            display(bundle, raw=True)
        else:
            sys.stderr.write(self.text)
            sys.stderr.flush()


def watch(budget=None, census=True, live=True, show=True):
    """Watches the code it wraps in this process (a context manager or a
    decorator): a live line while it runs, then leakspy's diagnosis (in a
    notebook under the cell). ``budget``: the share of the time the probe's
    work may take (default: `leakspy run`'s, 1 %). Nothing is raised into the code."""
    return Watch(budget=budget, census=census, live=live, show=show)


def _say(message):
    """A message under the cell (a notebook) or on stderr."""
    try:
        if in_notebook():
            from IPython.display import display

            display({"text/plain": message}, raw=True)
            return
    except Exception:
        pass
    try:
        sys.stderr.write(message + "\n")
        sys.stderr.flush()
    except Exception:
        pass


# -- the report as notebook output ------------------------------------------------


def report_fragment(document):
    """The HTML report's sections as one element for a notebook's output:
    its style scoped to that element (the report's own rules would restyle
    the whole notebook page), the body's content as it is."""
    import re

    style = re.search(r"<style>(.*?)</style>", document, re.S)
    main = re.search(r"<main>(.*)</main>", document, re.S)
    if main is None:
        return document
    css = _scoped(style.group(1)) if style else ""
    return '<div class="leakspy-report"><style>%s</style>%s</div>' % (css, main.group(1))


def _scoped(css):
    out = []
    for rule in css.split("}"):
        if "{" not in rule:
            continue
        selectors, body = rule.split("{", 1)
        scoped = []
        for sel in selectors.split(","):
            sel = sel.strip()
            if not sel:
                continue
            if sel in (":root", "body", "main", "html"):
                scoped.append(".leakspy-report")
            else:
                scoped.append(".leakspy-report " + sel)
        out.append("%s{%s}" % (",".join(scoped), body))
    return "\n".join(out)


# -- the live line ----------------------------------------------------------------------


class _Live(object):
    """Reads the trace as the monitor writes it and shows one line about it:
    in a notebook, an output of the cell updated in place; in a terminal, a
    line redrawn on stderr; else a line every ten seconds."""

    def __init__(self, trace):
        self.trace = trace
        self.state = _TraceState()
        self.stopping = threading.Event()
        self.thread = None
        self.handle = None
        self.offset = 0
        self.partial = b""
        self.notebook = in_notebook()
        try:
            self.tty = sys.stderr.isatty()
        except Exception:
            self.tty = False
        self.last_plain = time.monotonic()

    def begin(self):
        if self.notebook:
            try:
                from IPython.display import display

                self.handle = display(self._bundle("leakspy: watching..."), raw=True,
                                      display_id=True)
            except Exception:
                self.handle = None
        import contextvars

        # The cell's context: output from this thread goes to the cell that
        # started the watch.
        ctx = contextvars.copy_context()
        self.thread = threading.Thread(target=ctx.run, args=(self._run,),
                                       name="leakspy-live", daemon=True)
        self.thread.start()

    def end(self):
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(5.0)
        try:
            self._update(final=True)
        except Exception:
            pass
        if self.tty and not self.notebook:
            try:
                sys.stderr.write("\n")
                sys.stderr.flush()
            except Exception:
                pass

    def _run(self):
        while not self.stopping.wait(LIVE_EVERY_S):
            try:
                self._update()
            except Exception:
                pass

    def _read(self):
        try:
            with open(self.trace, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return
        self.offset += len(data)
        data = self.partial + data
        lines = data.split(b"\n")
        self.partial = lines.pop()
        for line in lines:
            try:
                self.state.add(json.loads(line))
            except Exception:
                continue

    def _update(self, final=False):
        self._read()
        line = self.state.line(final)
        if self.notebook:
            if self.handle is not None:
                self.handle.update(self._bundle(line), raw=True)
        elif self.tty:
            sys.stderr.write("\r\x1b[2K" + line)
            sys.stderr.flush()
        elif final or time.monotonic() - self.last_plain >= PLAIN_EVERY_S:
            self.last_plain = time.monotonic()
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    @staticmethod
    def _bundle(line):
        import html

        return {"text/plain": line,
                "text/html": '<pre style="margin:0;white-space:pre-wrap">%s</pre>'
                             % html.escape(line)}


class _TraceState(object):
    """What the live line says, from the trace's events."""

    def __init__(self):
        self.t = 0.0
        self.steps = 0
        self.rss = None
        self.rss_first = None
        # (steps, rss) once warm-up is over (the probe's own bound: so many
        # steps and seconds after the first): the per-step figure leaves out
        # imports and first-step work, as the verdict does.
        self.rss_at_step = None
        self.t_first_step = None
        self.censuses = 0
        self.holder = None

    def add(self, ev):
        kind = ev.get("kind")
        self.t = max(self.t, float(ev.get("t") or 0.0))
        if kind == "sample":
            rss = (ev.get("total") or {}).get("rss")
            if isinstance(rss, int):
                self.rss = rss
                if self.rss_first is None:
                    self.rss_first = rss
                if self.rss_at_step is None and self._warm(self.t):
                    self.rss_at_step = (self.steps, rss)
        elif kind == "step":
            s = ev.get("step")
            if isinstance(s, int):
                self.steps = max(self.steps, s)
                if self.t_first_step is None:
                    self.t_first_step = self.t
        elif kind == "census":
            self.censuses += 1
        elif kind == "suspect":
            h = ev.get("holder") or {}
            if h.get("path"):
                self.holder = h["path"]

    def _warm(self, t):
        from ._probe import WARMUP_S, WARMUP_STEPS

        return (self.t_first_step is not None and self.steps >= WARMUP_STEPS
                and t - self.t_first_step >= WARMUP_S)

    def line(self, final=False):
        parts = ["leakspy", "%s %.0f s" % ("watched" if final else "watching", self.t)]
        if self.steps:
            rate = self.steps / self.t if self.t > 0 else 0.0
            parts.append("step {:,} ({:.0f}/s)".format(self.steps, rate))
        if self.rss is not None:
            mem = "RSS %s" % _bytes(self.rss)
            if self.rss_first is not None:
                mem += ", %s since the start" % _bytes(self.rss - self.rss_first, sign=True)
            if self.rss_at_step is not None and self.steps > self.rss_at_step[0] + 10:
                per = (self.rss - self.rss_at_step[1]) / (self.steps - self.rss_at_step[0])
                mem += " (%s/step)" % _bytes(per, sign=True)
            parts.append(mem)
        if self.censuses:
            parts.append("%d census%s" % (self.censuses, "" if self.censuses == 1 else "es"))
        if self.holder:
            parts.append("growing: held by %s" % self.holder)
        if final:
            parts.append("diagnosis below")
        return " \u00b7 ".join(parts)


def _bytes(n, sign=False):
    s = "-" if n < 0 else ("+" if sign else "")
    n = abs(float(n))
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return "%s%.0f %s" % (s, n, unit) if unit == "B" else "%s%.1f %s" % (s, n, unit)
        n /= 1024.0
    return s + "?"


# -- IPython magics ------------------------------------------------------------------------

USAGE = """%leakspy watch [--budget F] [--no-census]   watch the rest of this cell
%%leakspy watch [--budget F] [--no-census]  watch this cell
%leakspy start [--budget F] [--no-census]   watch every cell from here on...
%leakspy stop                               ...until this, and show the diagnosis"""


def _parse(line):
    words = line.split()
    if not words:
        return None, {}
    command, rest = words[0], words[1:]
    opts = {}
    i = 0
    while i < len(rest):
        w = rest[i]
        if w == "--no-census":
            opts["census"] = False
        elif w.startswith("--budget"):
            value = w.partition("=")[2]
            if not value and i + 1 < len(rest):
                i += 1
                value = rest[i]
            try:
                opts["budget"] = float(value)
            except ValueError:
                return None, {}
        else:
            return None, {}
        i += 1
    return command, opts


class _Magics(object):
    """``%leakspy`` and ``%%leakspy``; one per shell."""

    def __init__(self, ip):
        self.ip = ip
        self.session = None  # `%leakspy start` ... `%leakspy stop`
        self.cell_watch = None  # `%leakspy watch` until the cell ends

    def magic(self, line, cell=None):
        command, opts = _parse(line)
        if cell is not None:
            if command != "watch":
                _say("usage:\n" + USAGE)
                return self.ip.run_cell(cell)
            with Watch(**opts):
                _run_body(self.ip, cell)
            return None
        if command == "watch":
            if self.cell_watch is not None or self.session is not None:
                _say("leakspy: already watching")
                return None
            self.cell_watch = Watch(**opts).start()
            self.ip.events.register("post_run_cell", self._cell_ended)
        elif command == "start":
            if self.session is not None or self.cell_watch is not None:
                _say("leakspy: already watching (`%leakspy stop` ends it)")
                return None
            self.session = Watch(**opts).start()
        elif command == "stop" and not opts:
            w, self.session = self.session, None
            if w is None:
                _say("leakspy: not watching (`%leakspy start` starts)")
            else:
                w.stop()
        else:
            _say("usage:\n" + USAGE)
        return None

    def _cell_ended(self, result=None):
        try:
            self.ip.events.unregister("post_run_cell", self._cell_ended)
        except Exception:
            pass
        w, self.cell_watch = self.cell_watch, None
        if w is not None:
            w.stop()


def _run_body(ip, body):
    """Runs a cell magic's body as the cell it is written in: under that
    cell's number (``In[N]`` in tracebacks and in the report; IPython 9
    counts the next cell already) and with its lines numbered as the user
    sees them, the magic's line first (a comment stands in for it)."""
    saved = ip.execution_count
    try:
        n = len(ip.history_manager.input_hist_raw) - 1
        if n > 0:
            ip.execution_count = n
    except Exception:
        pass
    try:
        return ip.run_cell("# %%leakspy\n" + body)
    finally:
        ip.execution_count = saved


def load_ipython_extension(ip):
    """``%load_ext leakspy``: the ``%leakspy`` / ``%%leakspy`` magics."""
    magics = getattr(ip, "_leakspy_magics", None)
    if magics is None:
        magics = _Magics(ip)
        ip._leakspy_magics = magics
    ip.register_magic_function(magics.magic, magic_kind="line_cell", magic_name="leakspy")


def unload_ipython_extension(ip):
    magics = getattr(ip, "_leakspy_magics", None)
    if magics is None:
        return
    for w in (magics.cell_watch, magics.session):
        if w is not None:
            w.stop()
    magics.cell_watch = magics.session = None
