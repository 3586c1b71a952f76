"""The in-process probe: steps, censuses, suspects, holders, creation sites.

Started by the bootstrap ``sitecustomize`` when ``LEAKSPY_PROBE_SOCKET`` is
set (``leakspy run``); does nothing otherwise. Nothing here may raise into
the user's code, print, or change what the program does: every entry point
(hooks, the timer thread, fork and exit handlers) swallows its own errors,
and a broken channel switches the probe off for good in that process.
"""

import atexit
import collections
import gc
import os
import sys
import time

try:
    import _thread
except ImportError:  # pragma: no cover
    _thread = None

from . import __version__
from ._channel import Channel

_monotonic = time.monotonic
_perf = time.perf_counter
# The probe's work is charged in the CPU time of the thread that does it:
# a census that waits for a core on a busy machine makes every other thread
# of the job wait as long, and charged in wall time it used up a burst
# before it could name anything. What the steps after a census lose (its
# cache misses), and the step messages, are measured in the thread's CPU
# time too: a step's wall time, and a 30-microsecond message's, also move
# with every other program's scheduling, which is not the probe's doing.
_cpu = time.thread_time
_INF = float("inf")

# The share of the job's time the probe may use, unless told otherwise
# (`leakspy run --probe-budget`, which always passes it).
DEFAULT_BUDGET = 0.01

# One step message per 0.1 s at most, the monitor's own sampling interval: a
# message costs the job a socket write and a wake-up of the monitor (tens of
# microseconds, more on a busy machine), and finer steps add nothing to a
# per-step fit of 10 Hz samples.
STEP_COALESCE_S = 0.1
FIRST_CENSUS_STEPS = 3
# What the first census is expected to cost before one was timed: the upper
# end of a census at torch's baseline after a first step (0.1-0.3 s on 2
# busy cores, docs/probe.md). The first census waits until the budget has
# paid for that much, so a short or healthy job never spends more than its
# budget on the probe (at 1 %, 25 s of its time; a job that leaks gets a
# burst long before).
FIRST_CENSUS_COST_S = 0.25
# What the optimizer hook and `leakspy.step()` cost per call, charged to the
# budget by count: the upper end of python/tests/bench_probe.py's figures
# (0.4-1.0 us), since timing each call would cost as much as the call.
STEP_COST_S = 1e-6
# A census also slows the steps right after it (the caches it evicted refill;
# 5-66 % of its own time on a training loop, bench/probe_excess.py): the
# probe times this many steps after each census against the step time
# before it and charges what they took beyond it.
AFTER_STEPS = 30
# tracemalloc runs until each suspect should have made two new instances (at
# the rate it rose between censuses: a figure every ten steps needs twenty),
# TRACE_STEPS steps and TRACE_MIN_S at least (a reinforcement learner's
# rollout, between two optimizer steps, makes what it keeps), TRACE_MAX_STEPS
# and TRACE_MAX_S at most: it slows every allocation while it runs.
TRACE_STEPS = 3
TRACE_MIN_S = 1.0
TRACE_MAX_STEPS = 1000
TRACE_MAX_S = 3.0
TRACE_TIMER_S = 1.0
FIRST_TIMER_S = 1.0
MIN_TIMER_GAP_S = 0.1
MAX_GAP_S = 3600.0
# Frames kept per allocation: the innermost frame of the user's code is
# within a few of where a kept object is made (a tensor in a forward call,
# a figure in plt.subplots), and each frame kept costs every allocation.
TRACE_FRAMES = 16
MAX_FAILURES = 3
# A census is done in slices between steps: the job pauses at most this long
# for one (but for its first piece, which lists and counts every object).
SLICE_S = 0.05
# How far back from a tensor alive now a chain's head listed a few steps
# ago is looked for, in rounds (each step puts one node and that step's
# own graph before it), and the most nodes visited in all (about 20 ms).
CHAIN_LOOK_DEPTHS = (32, 256, 2048)
CHAIN_LOOK_VISITS = 20000

# A burst: when the monitor sees memory grow as a leak does (its live fit
# of RSS), it asks the probe to find out what grows. For a while the probe
# may spend BURST_BUDGET of the job's time, with a census every
# BURST_MIN_GAP_S at most (growth per step must have time to show between
# two), until it has named a holder of the user's and looked up the line that
# made what it holds, BURST_MAX_S has passed, or the burst's work reached
# BURST_MAX_WORK_S.
# Then the steady budget again, with the burst's overdraft forgiven (the
# report says what it cost). A healthy job never sees one.
BURST_BUDGET = 0.5
BURST_MAX_S = 20.0
BURST_MAX_WORK_S = 6.0
BURST_MIN_GAP_S = 0.8
BURST_EXTRA_CENSUSES = 2
# A burst whose censuses name nothing ends after this many (a suspect needs
# four in a row): what grows is not in Python objects, or nothing does; the
# next one waits twice as long.
BURST_FRUITLESS_CENSUSES = 6
BURST_COOLDOWN_S = 120.0
MAX_BURSTS = 4
# The first census is warm-up (not compared with: imports and first-step
# work add objects) when it comes within this many steps or seconds of the
# loop's start; later, it is the baseline of every series.
WARMUP_STEPS = 50
WARMUP_S = 3.0
# The last look (at exit, or when `leakspy attach` detaches) takes one more
# census and searches holders for what rose at each of its last two
# comparisons, unless the heap is too big for that to be quick.
LAST_LOOK_MAX_OBJECTS = 3000000

S = None  # the probe's state in this process, or None when off


class _Counter(object):
    __slots__ = ("source", "n", "sent_t", "sent_n")

    def __init__(self, source):
        self.source = source
        self.reset()

    def reset(self):
        self.n = 0
        self.sent_t = -_INF
        self.sent_n = 0


class _State(object):
    def __init__(self, path, budget=None, census=None):
        self.active = True
        self.pid = os.getpid()
        self.forked = False
        self.channel = Channel(path)
        self.opt = _Counter("optimizer")
        self.man = _Counter("manual")
        self.due = 0.0
        self.budget = _budget(budget)
        now = _monotonic()
        self.next_census = now + (
            FIRST_CENSUS_COST_S / self.budget if self.budget > 0 else 0.0)
        # The probe's own accounting (docs/probe.md, "Cost"): seconds of work
        # it measured on the job's threads, and the census credit those
        # seconds are paid from (`_settle`).
        self.spent = 0.0
        self.parts = {"census": 0.0, "holders": 0.0, "sites": 0.0, "after": 0.0,
                      "messages": 0.0, "last_look": 0.0}
        self.credit = 0.0
        self.expected = FIRST_CENSUS_COST_S
        self.acct_t = now
        self.acct_probe = 0.0
        self.job_s = 0.0  # the job's own time (wall, less the probe's work)
        # Bursts (BURST_BUDGET above).
        self.burst_until = 0.0
        self.burst_work0 = 0.0
        self.burst_spent = 0.0
        self.burst_named = False
        self.burst_extra = 0  # censuses since the first holder was named
        self.burst_censuses = 0
        self.sent_in_burst = False  # a suspect (named or not) came in this burst
        self.burst_cooldown = BURST_COOLDOWN_S
        self.burst_ok_after = 0.0
        self.bursts = 0
        self.burst_reason = None
        self.last_census_t = -_INF
        self.look_wanted = False
        self.looked = False
        # Iterations: a step of an optimizer that already stepped since the
        # last one starts the next (two optimizers stepping together are one
        # iteration, not two).
        self.iter_opts = set()
        self.optimizers = 1
        # Per-step CPU time of the stepping thread, between censuses.
        self.step_t = _cpu()  # at the end of the last census
        self.step_n = 0
        self.loop_t = None  # when the loop started (the third step)
        self.step_dt = None  # CPU seconds per step before the last census
        self.after_left = 0  # steps after a census still to be timed
        self.after_t = 0.0
        self.after_excess = 0.0
        # What the last census cost on its own, and what the steps after it
        # lost (its cache misses): `expected` is their sum.
        self.census_s = FIRST_CENSUS_COST_S
        self.after_cost = 0.0
        if census is None:
            census = os.environ.get("LEAKSPY_PROBE_CENSUS", "1").strip() != "0"
        self.census_wanted = bool(census)
        self.census_on = bool(census) and self.budget > 0
        # A forked child: the frames of the parent's code that forked it
        # ((file, line, function), innermost first), for its hello.
        self.fork_frames = None
        self.malloc_trim = None
        self.pyplot_checked = set()  # series looked for under pyplot's figures
        self.census_job = None  # the census under way, between its slices
        self.whole_next = False  # the next census in one piece (it has suspects to search)
        self.longest_pause = 0.0  # the longest the job waited for one slice of probe work
        self.deferred = set()  # suspects left to the next census, run whole
        self.attached = False
        self.busy = _thread.allocate_lock()
        self.connect_lock = _thread.allocate_lock()
        self.failures = 0
        self.exiting = False
        self.t_start = _monotonic()
        self.census = None
        self.libs = None
        self.opt_handle = None
        self.finder = None
        # tracemalloc for creation sites
        self.trace_pending = {}
        self.trace_lens = {}  # container id -> its length when its holder was named
        self.trace_ours = False
        self.trace_n = 0
        self.trace_steps = TRACE_STEPS  # steps to trace for the pending keys
        self.census_gap = 0  # steps between the last two censuses
        self.burst_free = False  # the census that starts a burst is not owed
        self.trace_t = 0.0
        self.trace_wall = 0.0
        self.trace_noted = False
        self.sent = {}  # suspect key -> message sent (to resend with created_at)
        # the timer thread (programs that never step)
        self.timer_alive = False
        self.timer_sleeping = False
        self.timer_stop = False
        self.timer_paused = False
        self.wake = None
        self.exited = None


def _budget(given=None):
    try:
        b = float(os.environ.get("LEAKSPY_PROBE_BUDGET", DEFAULT_BUDGET)
                  if given is None else given)
    except (TypeError, ValueError):
        return DEFAULT_BUDGET
    if not (b == b) or b <= 0:  # NaN or off
        return 0.0
    return min(b, 1.0)


def _int_env(name):
    v = os.environ.get(name)
    if v is None:
        return None
    try:
        return int(v.strip())
    except ValueError:
        return None


def _clean(s):
    """A string JSON readers accept (no lone surrogates from undecodable bytes)."""
    if not isinstance(s, str):
        s = str(s)
    try:
        s.encode("utf-8")
        return s
    except UnicodeEncodeError:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


# -- start -------------------------------------------------------------------


_process_hooks = False  # atexit and fork handlers, once per process


def start(socket_path=None, budget=None, census=None, attached=False):
    """Starts the probe in this process: with the settings ``leakspy run``
    puts in the environment, or with those given (``leakspy attach``, which
    joins a process long after its start: ``_attach``). A probe that a
    previous ``leakspy attach`` left switched off starts afresh."""
    global S, _process_hooks
    if S is not None and S.active:
        # A probe that never sent anything after its monitor left (no
        # steps, no census) does not know it is gone: it is, if its peer
        # closed, and a new monitor gets a fresh probe.
        if not (attached and S.channel.peer_closed()):
            return
        _switch_off()
    path = socket_path or os.environ.get("LEAKSPY_PROBE_SOCKET")
    if not path or _thread is None:
        return
    st = _State(path, budget, census)
    st.attached = bool(attached)
    if not st.channel.connect():
        return
    S = st
    _hello(st)
    if not st.census_on:
        st.due = _INF
    import leakspy

    leakspy._step_impl = _manual_step
    _install_optimizer_hook(st)
    if os.environ.get("LEAKSPY_QUIET_INTERRUPT") == "1":
        _quiet_interrupts()
    if not _process_hooks:
        _process_hooks = True
        try:
            atexit.register(_at_exit)
        except Exception:
            pass
        try:
            os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_parent,
                                after_in_child=_after_fork_child)
        except Exception:
            pass
    if st.census_on:
        _start_timer(st)


def _quiet_interrupts():
    """``leakspy fix`` stops its runs as Ctrl-C would, and says so: the
    KeyboardInterrupt that reaches the top of the job is not followed by a
    traceback of wherever it happened to land (often inside the probe's own
    optimizer hook). ``finally`` blocks, ``atexit`` handlers and the exit
    status (130) are Python's as before; every other exception goes to the
    hook that was there."""
    previous = sys.excepthook
    if getattr(previous, "_leakspy_quiet", False):
        return

    def hook(tp, value, tb):
        try:
            if tp is not None and issubclass(tp, KeyboardInterrupt):
                return
        except Exception:
            pass
        previous(tp, value, tb)

    hook._leakspy_quiet = True
    sys.excepthook = hook


def _hello_msg(st):
    return {
        "kind": "hello",
        "pid": st.pid,
        "ppid": os.getppid(),
        "python": "%d.%d.%d" % sys.version_info[:3],
        "implementation": sys.implementation.name,
        "executable": _clean(sys.executable or ""),
        "argv": [_clean(a) for a in getattr(sys, "argv", [])],
        "probe": __version__,
        "forked": st.forked,
        "attached": st.attached,
        "rank": _int_env("RANK"),
        "local_rank": _int_env("LOCAL_RANK"),
        "world_size": _int_env("WORLD_SIZE"),
        "role": _role(),
        "started_at": _started_at(st),
    }


def _role():
    """What this process is to the job, when it can be told without
    importing anything: a DataLoader worker (torch sets its worker info
    in the worker), a multiprocessing child."""
    try:
        w = sys.modules.get("torch.utils.data._utils.worker")
        info = getattr(w, "_worker_info", None) if w is not None else None
        if info is not None:
            return "DataLoader worker %d of %d" % (int(info.id) + 1, int(info.num_workers))
        mp = sys.modules.get("multiprocessing.process")
        if mp is not None:
            name = mp.current_process().name
            if isinstance(name, str) and name != "MainProcess":
                return _clean("multiprocessing %s" % name)
    except Exception:
        pass
    return None


def _started_at(st):
    """The line of the user's code that forked this process (the innermost
    frame of the user's own files at the fork), for a forked child."""
    frames = st.fork_frames
    if not frames:
        return None
    try:
        from ._census import Libraries

        libs = st.libs or Libraries(os.path.dirname(os.path.abspath(__file__)) + os.sep)
        for f, line, function in frames:
            if libs.is_user_file(f):
                from . import _explain

                return {"file": _clean(_explain.file_name(f)), "line": line,
                        "function": _clean(function)}
    except Exception:
        pass
    return None


def _fork_frames():
    frames = []
    try:
        f = sys._getframe(2)
        while f is not None and len(frames) < 40:
            code = f.f_code
            frames.append((code.co_filename, f.f_lineno,
                           getattr(code, "co_qualname", code.co_name)))
            f = f.f_back
    except Exception:
        pass
    return frames


def _hello(st):
    _send(_hello_msg(st))


def _send(msg):
    st = S
    if st is None or not st.active:
        return False
    ch = st.channel
    if ch.sock is None and not _reconnect(st, ch):
        return False
    if ch.send(msg):
        return True
    _switch_off()
    return False


def _reconnect(st, ch):
    """A forked child connects on its own at its first message (a child that
    only execs another program, or a worker that never steps, stays silent),
    and says hello first."""
    with st.connect_lock:
        if ch.sock is None:
            if not st.forked or not ch.connect() or not ch.send(_hello_msg(st)):
                _switch_off()
                return False
    return True


def _note(level, message):
    st = S
    if st is None:
        return
    _send({"kind": "note", "pid": st.pid, "level": level, "message": _clean(message)})


def _describe(e):
    return "%s: %s" % (type(e).__name__, str(e)[:200])


def _switch_off():
    """For good, in this process: hooks out, thread stopped, channel closed."""
    st = S
    if st is None or not st.active:
        return
    st.active = False
    st.due = _INF
    try:
        import leakspy

        leakspy._step_impl = None
    except Exception:
        pass
    h, st.opt_handle = st.opt_handle, None
    if h is not None:
        try:
            h.remove()
        except Exception:
            pass
    _remove_finder(st)
    _stop_timer(st)
    _stop_tracing(st)
    st.census_job = None
    try:
        st.channel.close()
    except Exception:
        pass


# -- steps (the hot path) ------------------------------------------------------


def _step(c):
    st = S
    if st is None or not st.active:
        return
    c.n += 1
    now = _monotonic()
    if st.after_left:
        _after_census_step(st)
    if now - c.sent_t >= STEP_COALESCE_S:
        c.sent_t = now
        c.sent_n = c.n
        # (In CPU time: a message takes some tens of microseconds, and its
        # wall time on a busy machine is mostly whether the scheduler
        # happened to switch away in the middle of it.)
        t0 = _cpu()
        _send({"kind": "step", "pid": st.pid, "step": c.n, "source": c.source})
        # What the monitor asks (a burst, a last look) comes at this pace.
        _poll(st)
        _charge(st, "messages", _cpu() - t0)
    if now >= st.due:
        _on_due(st, c)


def _after_census_step(st):
    t = _cpu()
    st.after_excess += (t - st.after_t) - st.step_dt
    st.after_t = t
    st.after_left -= 1
    if not st.after_left:
        # Noise can make a window come out faster than usual: never a refund.
        st.after_cost = max(st.after_excess, 0.0)
        _charge(st, "after", st.after_cost)
        st.after_excess = 0.0
        # The next census waits until the credit covers this too: else every
        # census would overdraw the budget by what the steps after it lose.
        st.expected = st.census_s + st.after_cost


def _charge(st, part, seconds):
    """Probe work of one kind, on the job's threads."""
    st.spent += seconds
    st.parts[part] += seconds
    if st.burst_until:
        st.burst_spent += seconds


def _manual_step():
    try:
        _step(S.man)
    except Exception:
        pass


_is_compiling = None  # torch.compile traces: torch.compiler.is_compiling, once in


def _optimizer_hook(optimizer, args, kwargs):
    try:
        # Not inside code torch.compile traces: the probe's bookkeeping must
        # not become part of a compiled graph.
        if _is_compiling is not None and _is_compiling():
            return
        st = S
        if st is None:
            return
        it = st.iter_opts
        oid = id(optimizer)
        if oid in it:
            it.clear()
        it.add(oid)
        if len(it) == 1:
            _step(st.opt)
        elif len(it) > st.optimizers:
            st.optimizers = len(it)
    except Exception:
        pass


def _poll(st):
    """Reads what the monitor sent (non-blocking): a burst, a last look."""
    for msg in st.channel.receive():
        kind = msg.get("kind")
        if kind == "burst":
            _start_burst(st, msg.get("reason"))
        elif kind == "look":
            st.look_wanted = True
            st.due = 0.0
    if st.channel.dead:
        _switch_off()


def _start_burst(st, reason):
    now = _monotonic()
    if (not st.census_on or st.burst_until or now < st.burst_ok_after
            or st.bursts >= MAX_BURSTS):
        return
    st.bursts += 1
    st.burst_until = now + BURST_MAX_S
    st.burst_work0 = st.burst_spent
    st.burst_named = False
    st.burst_extra = 0
    st.burst_censuses = 0
    st.sent_in_burst = False
    st.burst_reason = reason if isinstance(reason, str) else None
    _settle(st, now)
    # A census at once: the monitor saw the growth already.
    st.credit = max(st.credit, st.expected)
    st.burst_free = True
    st.next_census = min(st.next_census, now)
    st.due = 0.0
    _note("info", "burst %d: %s; the probe spends up to %d %% of the job's time for at "
          "most %d s to find what grows" % (st.bursts, st.burst_reason or "memory grows",
                                           round(BURST_BUDGET * 100), BURST_MAX_S))


def _end_burst(st, now, why):
    if not st.burst_until:
        return
    _settle(st, now)
    st.burst_until = 0.0
    st.burst_ok_after = now + st.burst_cooldown
    # Back to the steady budget; what the burst overspent is not owed.
    st.credit = min(max(st.credit, 0.0), st.expected)
    _schedule(st, now)
    _note("info", "burst %d ended (%s) after %.2f s of probe work" % (
        st.bursts, why, st.burst_spent - st.burst_work0))


def _burst_check(st, now):
    """After a census in a burst: has it done its job?"""
    if now >= st.burst_until:
        _end_burst(st, now, "time limit")
    elif st.burst_spent - st.burst_work0 >= BURST_MAX_WORK_S:
        _end_burst(st, now, "work limit")
    elif not st.burst_named and st.burst_censuses >= BURST_FRUITLESS_CENSUSES and not (
            st.sent_in_burst or st.trace_pending):
        _end_burst(st, now, "nothing named")
        st.burst_cooldown *= 2
        st.burst_ok_after = now + st.burst_cooldown
    elif st.burst_named and not st.trace_pending and (
            st.burst_extra >= BURST_EXTRA_CENSUSES or not _unexplained(st.census)):
        # What it was for is done: a holder named, the line that made what
        # it holds looked up, and nothing else telling rising unnamed (or
        # two more censuses to name it). More come from the steady
        # censuses; the report fits every series.
        _end_burst(st, now, "holder named")


def _on_due(st, c):
    """A step when a census (or the end of a creation-site trace) may be due."""
    if not st.census_on or st.exiting:
        st.due = _INF
        return
    if not st.busy.acquire(False):
        return  # a census is under way (another thread)
    try:
        if st.census_job is not None:
            _census_slice(st)
        elif st.trace_pending:
            # (No census while tracemalloc runs: it would take ten times as long.)
            traced = (st.opt.n + st.man.n) - st.trace_n
            waited = _monotonic() - st.trace_wall
            # What the traced steps lost so far counts against the burst's
            # work: a lookup under a heavy tracemalloc must not overrun it.
            lost = ((_cpu() - st.trace_t) - traced * st.step_dt
                    if st.step_dt is not None else 0.0)
            spent_out = st.burst_until and (
                st.burst_spent - st.burst_work0 + lost >= BURST_MAX_WORK_S)
            if (traced >= st.trace_steps and waited >= TRACE_MIN_S) or (
                    traced >= TRACE_STEPS and (waited >= TRACE_MAX_S or spent_out)):
                _resolve_sites(st)
        elif st.look_wanted:
            _last_look(st, c.source, c.n)
        elif c.n >= FIRST_CENSUS_STEPS and _census_paid(st):
            _census(st, c.source, c.n)
        _set_due(st)
    finally:
        st.busy.release()


def _probe_seconds(st):
    """All the probe has cost this process's threads so far: the work it
    timed, and its step hooks counted at their measured cost."""
    return st.spent + (st.opt.n + st.man.n) * STEP_COST_S


def _burst_share(st, t0, t1):
    """The part of [t0, t1] a burst covered."""
    if not st.burst_until or t1 <= t0:
        return 0.0
    return max(min(t1, st.burst_until) - t0, 0.0) / (t1 - t0)


def _settle(st, now):
    """Brings the census credit up to ``now``: the job's own time since the
    last settlement earns the budget of it, the probe's work since then
    spends it. So over a run the probe's work stays within the budget of the
    job's own time, whatever each census costs. The credit never exceeds
    one census, so a stretch without steps (evaluation, a long data load)
    does not buy a burst of censuses afterwards. In a burst the wall clock
    earns BURST_BUDGET: a leak is to be explained while it happens, on a
    busy machine too."""
    probe = _probe_seconds(st)
    d_probe = probe - st.acct_probe
    d_job = max(now - st.acct_t - d_probe, 0.0)
    st.job_s += d_job
    b = _burst_share(st, st.acct_t, now)
    earned = d_job * (st.budget * (1.0 - b) + BURST_BUDGET * b)
    st.credit = min(st.credit + earned - d_probe, st.expected)
    st.acct_t, st.acct_probe = now, probe


def _schedule(st, now):
    """The next census: when the job's time will have paid for it."""
    owed = st.expected - st.credit
    rate = BURST_BUDGET if st.burst_until else st.budget
    st.next_census = now + (owed / rate if owed > 0 else 0.0)
    if st.burst_until:
        st.next_census = max(st.next_census, st.last_census_t + BURST_MIN_GAP_S)


def _census_paid(st):
    now = _monotonic()
    if st.step_n == 0:
        # The step rate is timed from here (the third step), not from the
        # probe's start: imports and data loading came before. So is the
        # credit: the budget is a share of the training loop's time, and the
        # start-up earns nothing the loop would then pay for.
        st.step_t, st.step_n = _cpu(), st.opt.n + st.man.n
        st.loop_t = now
        _settle(st, now)
        st.credit = min(st.credit, 0.0)
        if not st.burst_until:
            _schedule(st, now)
    if st.burst_until and now >= st.burst_until:
        _end_burst(st, now, "time limit")
    if now < st.next_census:
        return False
    _settle(st, now)
    # Steps since the schedule was made cost a little: a census that is
    # nearly paid for waits, it does not run on credit.
    if st.credit < 0.98 * st.expected:
        _schedule(st, now)
        return False
    return True


def _send_cost(st, now):
    _send({"kind": "cost", "pid": st.pid, "probe_s": round(_probe_seconds(st), 6),
           "wall_s": round(now - st.t_start, 6), "job_s": round(st.job_s, 6),
           "budget": st.budget, "censuses": st.census.n if st.census is not None else 0,
           "parts": dict((k, round(v, 6)) for k, v in st.parts.items()),
           "steps": round((st.opt.n + st.man.n) * STEP_COST_S, 6),
           "bursts": st.bursts, "burst_s": round(st.burst_spent, 6),
           "burst_budget": BURST_BUDGET, "optimizers": st.optimizers,
           "malloc_trim": st.malloc_trim, "pause_s": round(st.longest_pause, 6)})


def _set_due(st):
    if not st.census_on or not st.active:
        st.due = _INF
    elif st.census_job is not None or st.trace_pending or st.look_wanted or st.step_n == 0:
        # Look at every step (until the loop's start is marked at its third
        # step: the budget is earned from there).
        st.due = 0.0
    else:
        st.due = st.next_census


# -- optimizer hook ---------------------------------------------------------------


def _install_optimizer_hook(st):
    if "torch.optim.optimizer" in sys.modules or "torch.optim" in sys.modules:
        _register_optimizer_hook()
        if st.opt_handle is not None:
            return
    finder = _OptimFinder()
    st.finder = finder
    sys.meta_path.insert(0, finder)


def _register_optimizer_hook():
    st = S
    if st is None or not st.active or st.opt_handle is not None:
        return
    try:
        m = sys.modules.get("torch.optim.optimizer")
        reg = getattr(m, "register_optimizer_step_post_hook", None) if m is not None else None
        if reg is None:
            if m is not None:
                _note("info", "optimizer steps are not counted: this torch has no global "
                      "optimizer hooks (torch >= 2.0); call leakspy.step() in the loop")
            return
        global _is_compiling
        torch = sys.modules.get("torch")
        comp = getattr(torch, "compiler", None) if torch is not None else None
        _is_compiling = getattr(comp, "is_compiling", None)
        st.opt_handle = reg(_optimizer_hook)
    except Exception as e:
        _note("warn", "optimizer hook not installed: %s" % _describe(e))


def _remove_finder(st):
    f, st.finder = st.finder, None
    if f is not None:
        try:
            sys.meta_path.remove(f)
        except ValueError:
            pass


class _OptimFinder(object):
    """Post-import hook: registers the optimizer step hook once ``torch.optim``
    has been imported (torch is never imported by the probe itself)."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch.optim":
            return None
        st = S
        try:
            if st is not None:
                _remove_finder(st)
            spec = None
            for finder in list(sys.meta_path):
                fs = getattr(finder, "find_spec", None)
                if fs is None or finder is self:
                    continue
                spec = fs(name, path, target)
                if spec is not None:
                    break
            if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
                return spec
            spec.loader = _LoaderProxy(spec.loader)
            return spec
        except Exception:
            return None

    def invalidate_caches(self):
        pass


class _LoaderProxy(object):
    def __init__(self, loader):
        self._leakspy_loader = loader

    def __getattr__(self, name):
        return getattr(self._leakspy_loader, name)

    def create_module(self, spec):
        return self._leakspy_loader.create_module(spec)

    def exec_module(self, module):
        loader = self._leakspy_loader
        try:
            # Put the real loader back where the module shows it.
            module.__loader__ = loader
            if getattr(module, "__spec__", None) is not None:
                module.__spec__.loader = loader
        except Exception:
            pass
        loader.exec_module(module)
        try:
            _register_optimizer_hook()
        except Exception:
            pass


# -- census --------------------------------------------------------------------------


def _gc_paused():
    """The collector paused while the probe holds the list of every object
    (``_census.GcPaused``); loaded with the census, never before."""
    from ._census import GcPaused

    return GcPaused()


def _ensure_census(st):
    """The census machinery, loaded at the first census (a process that ends
    before it never pays for the import)."""
    if st.census is None:
        try:
            from ._census import Census, Libraries
            # What the holder search and the census's message use, imported
            # now: objects made by an import in the middle of the run (the
            # tuples of `re`'s cache for a module's patterns) would be the
            # newest of their kind at the next census, and its picks.
            from . import _explain, _holders, _ipython, _malloc  # noqa: F401

            # (malloc's calls too: their ctypes argument tuples, made at
            # the first census's end, were the newest tuples at the next.)
            _malloc._load()
            here = os.path.dirname(os.path.abspath(__file__)) + os.sep
            st.libs = Libraries(here)
            st.census = Census(st.libs)
        except Exception as e:
            st.census_on = False
            _note("warn", "census disabled: %s" % _describe(e))
            return False
    return True


def _census(st, source, step, rises=None, look=None):
    """Starts a census: its first slice now, the others at the next steps
    (``_census_slice``), so the job never pauses long for it; a last look
    runs whole (the program has ended, or the monitor is leaving)."""
    if not _ensure_census(st):
        return
    n = st.opt.n + st.man.n
    c0 = _cpu()
    if st.after_left:
        # The steps after the last census are still being timed: what they
        # lost so far is charged, and the timing stops here. The steps that
        # run this census's slices would count its work a second time.
        st.after_cost = max(st.after_excess, 0.0)
        _charge(st, "after", st.after_cost)
        st.after_left = 0
        st.after_excess = 0.0
    if n > st.step_n:
        st.step_dt = (c0 - st.step_t) / (n - st.step_n)
    st.census_gap = n - st.step_n if st.census is not None and st.census.n else 0
    warm = st.census.n == 0 and (
        st.loop_t is None or n - st.step_n < WARMUP_STEPS or _monotonic() - st.loop_t < WARMUP_S)
    whole = look is not None or st.whole_next
    also = st.deferred if whole else None
    st.whole_next = False
    st.deferred = set()
    gen = st.census.slices(want_picks=True, rises=rises, warmup=warm, last=look is not None,
                           also=also)
    st.census_job = {"gen": gen, "source": source, "step": step, "look": look, "wall": 0.0,
                     "cpu": 0.0, "pause": 0.0, "slices": 0, "done": None, "locals": None,
                     "values": None, "holders": None, "held": 0.0, "whole": whole}
    if not whole:
        # The locals as they are now, when the objects are listed: by the
        # census's last slice the loop has rebound its variables.
        try:
            from ._holders import snapshot_locals

            st.census_job["locals"], st.census_job["values"] = snapshot_locals(st.libs)
            _steps_kept(st.census_job)
        except Exception:
            pass
    _census_slice(st, whole=whole)


def _census_slice(st, whole=False):
    """The next piece of the census under way: slices of it until SLICE_S of
    wall time has passed (the job's pause), then back to the job; once it
    is counted, its message, then its holder search in slices the same
    way (``_holder_steps``), then its bookkeeping (``_census_done``)."""
    job = st.census_job
    t0 = _perf()
    c0 = _cpu()
    try:
        if job["done"] is None:
            with _gc_paused():
                while True:
                    try:
                        next(job["gen"])
                    except StopIteration as e:
                        job["done"] = e.value
                        break
                    if not whole and _perf() - t0 >= SLICE_S:
                        break
            if job["done"] is not None:
                from . import _malloc

                fields = job["done"][0]
                fields["malloc"] = _malloc.stats()
                role = _role()
                if role is not None:
                    fields["role"] = role
    except Exception as e:
        st.census_job = None
        _charge(st, "census", _cpu() - c0)
        _census_failed(st, e)
        return
    # Charged in the thread's CPU time: on a starved machine a census of
    # 0.4 s of CPU can take seconds of wall time waiting for a core, which
    # every other thread of the job waits for too; charged in wall time it
    # used up a burst before it could name anything.
    cpu = _cpu() - c0
    if job["holders"] is None:
        _charge(st, "census", cpu)
        job["wall"] += _perf() - t0
        job["cpu"] += cpu
        job["slices"] += 1
        _paused(st, job, t0)
        if job["done"] is None:
            return
        _census_message(st, job)
        job["holders"] = _holder_steps(st, job, job["whole"])
    h0 = _cpu()
    finished = False
    try:
        while True:
            try:
                next(job["holders"])
            except StopIteration:
                finished = True
                break
            if not whole and _perf() - t0 >= SLICE_S:
                break
    except Exception as e:
        finished = True
        _note("warn", "holder search failed: %s" % _describe(e))
    job["held"] += _cpu() - h0
    _paused(st, job, t0)
    if finished:
        _census_done(st, job)


def _paused(st, job, t0):
    """Counts the job's pause for this slice (wall time)."""
    wall = _perf() - t0
    job["pause"] = max(job["pause"], wall)
    st.longest_pause = max(st.longest_pause, wall)


def _census_message(st, job):
    """The census's message, once it is counted."""
    fields = job["done"][0]
    msg = {"kind": "census", "pid": st.pid, "step": job["step"], "source": job["source"],
           "cost_s": round(job["wall"], 6), "cpu_s": round(job["cpu"], 6),
           "pause_s": round(job["pause"], 6),
           "slices": job["slices"], "n": st.census.n, "dropped": st.channel.take_dropped(),
           "warmup": st.census.n <= st.census.warm_n}
    if st.burst_until:
        msg["burst"] = st.bursts
    if job["look"] is not None:
        # A last look: "exit" (after the program's own end, when what its
        # functions held is gone: not a point of the series) or "detach".
        msg["look"] = job["look"]
    msg.update(fields)
    _send(msg)
    del fields, msg
    job["gen"] = None
    # The next census is expected to cost what this one did without its
    # holder search (a search is rare; the credit pays it back), and what
    # the steps after the last one lost.
    st.census_s = max(job["cpu"], 1e-4)
    st.expected = st.census_s + st.after_cost


def _steps_kept(job):
    """Tells the census which of the probe's containers hold the job's
    objects for it (the snapshot of the locals), so that none counts as
    their holder."""
    from . import _steps

    _steps.kept = {id(c) for c in (job.get("locals"), job.get("values")) if c is not None}


def _holder_steps(st, job, whole):
    """The end of a census as pieces of work: its holder search (when
    something qualified), the holders of filling buffers, and the open
    figures' series. ``whole``: the census runs in one piece, with its
    search (nothing the job does comes between)."""
    suspects = job["done"][1]
    job["done"] = (job["done"][0], None)
    if suspects:
        try:
            yield from _suspects_steps(st, suspects, job["step"], job.get("locals"),
                                       sliced=not whole)
        except Exception as e:
            _note("warn", "suspect search failed: %s" % _describe(e))
    del suspects
    try:
        yield from _name_bounded_steps(st, job.get("locals"), not whole)
    except Exception as e:
        _note("warn", "bounded buffer holder search failed: %s" % _describe(e))
    job["values"] = job["locals"] = None
    _steps_kept(job)
    try:
        _refresh_pyplot(st)
    except Exception as e:
        _note("warn", "figure holder refresh failed: %s" % _describe(e))


def _census_done(st, job):
    """The census and its holder search are over: the budget's bookkeeping."""
    st.census_job = None
    job["holders"] = job["done"] = None
    held = job["held"]
    _charge(st, "holders", held)
    total = job["cpu"] + held
    if total / st.budget > MAX_GAP_S:
        st.census_on = False
        _note("warn", "census disabled: budget exhausted (one census took %.1f s)" % total)
    now = _monotonic()
    st.last_census_t = now
    _settle(st, now)
    if st.burst_free:
        # The census the monitor asked for was taken on trust (its cost
        # unknown until now): the burst starts owing nothing.
        st.burst_free = False
        st.credit = max(st.credit, 0.0)
    if st.burst_until:
        st.burst_censuses += 1
        if st.burst_named:
            st.burst_extra += 1
        _burst_check(st, now)
    _schedule(st, now)
    st.step_t, st.step_n = _cpu(), st.opt.n + st.man.n
    if st.trace_pending:
        # Tracing starts only now, when the census's whole search is over:
        # the probe's own work under tracemalloc runs 50-100 times slower
        # (a bounded buffer's holder search of 0.15 s took 16 s, and the
        # job's steps with it). The traced steps are timed from here and
        # stand for the steps after the census.
        _start_tracing(st)
    if st.trace_pending:
        st.trace_t = st.step_t
    elif job["step"] is not None and st.step_dt is not None:
        st.after_t, st.after_left, st.after_excess = st.step_t, AFTER_STEPS, 0.0
    _send_cost(st, now)


def _finish_census(st):
    """Runs what is left of a census under way, in one piece (at exit,
    before a last look)."""
    while st.census_job is not None:
        _census_slice(st, whole=True)


def _last_look(st, source, step, look="detach"):
    """One more census, and holders for what rose at each of its last two
    comparisons: at exit, or when the monitor is about to leave
    (``leakspy attach``). What it finds is what the report gets."""
    st.look_wanted = False
    _finish_census(st)
    if st.looked or not st.census_on or st.census is None or st.census.n < 2:
        # (Without two censuses before it, nothing can have risen twice.)
        st.looked = True
        _send({"kind": "looked", "pid": st.pid, "step": step})
        return
    st.looked = True
    if look == "exit" and not _unexplained(st.census):
        # Nothing rose at its last comparisons that is not named already:
        # a census after the program's end would find nothing new.
        _send({"kind": "looked", "pid": st.pid, "step": step})
        return
    if st.census.last_objects > LAST_LOOK_MAX_OBJECTS:
        _send({"kind": "looked", "pid": st.pid, "step": step})
        return
    before = dict(st.parts)
    _census(st, source, step, rises=2, look=look)
    _finish_census(st)
    # Kept apart in the account: not work the budget scheduled.
    for k in ("census", "holders"):
        d = st.parts[k] - before[k]
        st.parts[k] -= d
        st.parts["last_look"] += d
    _send({"kind": "looked", "pid": st.pid, "step": step})


def _unexplained(census):
    """Telling series (not the counts of a library's types, which move with
    whatever holds them) that rose at their last comparison and have no
    suspect yet."""
    user = set()
    for info in list(census._type_info.values()):
        if info[4]:
            user.add("type:" + info[2])
    return [k for k in census.growth.runs
            if k not in census.suspect_keys and (not k.startswith("type:") or k in user)]


def _census_failed(st, e):
    st.failures += 1
    _note("warn", "census failed: %s" % _describe(e))
    if st.failures >= MAX_FAILURES:
        st.census_on = False
        _note("warn", "census disabled after %d failures" % st.failures)
    st.next_census = _monotonic() + 5.0


def _suspects_steps(st, suspects, step, frame_locals=None, sliced=False, retry=False):
    """Searches the holders of a census's suspects, in pieces, and sends
    them. ``sliced``: the census ran over several steps, and the search
    too: an instance that the job let go of meanwhile has no referrer left.
    A suspect whose holder is not found is not sent (unless its instances
    had no referrer in Python when they were picked). A chain's head moves
    on every step: updated in place (`total += loss`), the listed head is
    the head now and is searched with the rest; rebound (`self.total =
    self.total + loss`), the head listed is not the one held now (and the
    step's loss, which the chain feeds, is no holder): the head as it is
    now is looked up and searched in one piece (``_chain_look``). Failing
    that, the next census runs in one piece and searches them at once
    (``st.deferred``), whether or not they rose again. ``retry``: the
    search of such a look, whose suspects without a holder are left to
    that census too."""
    from . import _explain
    from ._autograd import ALL_GRAPHS, CHAIN_KEYS

    census = st.census
    if sliced and any(s[0] in CHAIN_KEYS for s in suspects):
        chain = []
        for s in suspects:
            if s[0] in CHAIN_KEYS:
                moved = _moved_in_place(s[3]["objects"], s[3].get("walked_fns") or {})
                if moved:
                    s[3]["objects"] = moved  # searched in slices with the rest
                else:
                    chain.append(s)
        if chain:
            _chain_look(st, chain, step)
        for s in chain:
            s[3]["objects"] = []
        suspects = [s for s in suspects if not any(s is c for c in chain)]
        chain = None
        if not suspects:
            return
    # Instances of types whose count rises (records, copies of an agent, its
    # optimizer) are passed through on the way up, not taken for roots (a
    # look's search leaves them to the census's).
    through_types = census.rising_types
    if not retry:
        census.rising_types = set()
    found = yield from _explain.attribute_steps(st.libs, suspects, through_types,
                                                _rising_containers(census), frame_locals,
                                                sliced)
    for (key, per, count, info), (holder, bounded, picked) in zip(suspects, found):
        if bounded:
            census.suppressed[key] = census.n + 10
            continue
        if (sliced or retry) and holder is None and info.get("held", True):
            st.whole_next = True
            st.deferred.add(key)
            continue
        if holder is None:
            holder = {"kind": "unknown", "path": None, "container": None, "file": None,
                      "line": None, "chain": []}
            # A series of all graphs that named nobody did not name the
            # chain either: its history stays a suspect of its own (a chain
            # that outgrows the walk's cap over three censuses raises the
            # series of all graphs first, with the step's loss for example).
            if key in ALL_GRAPHS:
                census.graphs_apart = True
        elif key in ALL_GRAPHS and picked is not None:
            best = info["objects"][:info.get("best", 0)]
            census.graphs_apart = all(picked is not o for o in best)
            del best
        k = _explain.parse(key)
        obj = picked if picked is not None else (
            info["objects"][0] if info["objects"] else None)
        what, example = _explain.describe(k, obj, count)
        del obj
        msg = {"kind": "suspect", "pid": st.pid, "step": step, "key": key,
               "what": _clean(what), "per_census": round(float(per), 3), "count": count,
               "holder": _clean_holder(holder), "created_at": None, "example": example}
        census.suspect_keys.add(key)
        st.sent_in_burst = True
        if holder.get("kind") not in (None, "unknown") and not holder.get("library"):
            st.burst_named = True
        st.sent[key] = msg
        _send(msg)
        yield
        if holder.get("library"):
            pass  # an installed package's own bookkeeping: not the user's line
        elif holder.get("container_id") and k.kind != "figures":
            # The newest items of the container the holder holds are the
            # leak's own instances: their creation site is the leak's line.
            st.trace_pending[key] = holder["container_id"]
            if holder.get("_len") is not None:
                st.trace_lens[holder["container_id"]] = holder["_len"]
        elif k.kind != "numpy" and key != "graph.largest":
            # (No site for arrays, nor for the largest graph's tensor: it is
            # often made before tracing starts, a total added to in place,
            # and the biggest graph made while tracing may be another
            # chain's: no site rather than a wrong one.)
            st.trace_pending[key] = None
        if key in st.trace_pending and st.census_gap:
            # Trace long enough for two new instances, at the rate they came
            # between the last censuses (items of the holder's container).
            cid = st.trace_pending[key]
            run = census.growth.runs.get(_explain.container_key(cid)) if cid else None
            rate = (run[-1] - run[0]) / float(len(run) - 1) if run and len(run) > 1 else per
            if rate > 0:
                need = int(2.0 * st.census_gap / float(rate)) + 1
                st.trace_steps = max(st.trace_steps,
                                     min(max(need, TRACE_STEPS), TRACE_MAX_STEPS))
    del found
    for s in suspects:
        s[3]["objects"] = []
    census.dirty = True
    if st.trace_pending and st.exiting:
        # Nothing made from now on is the leak's: no creation site at exit.
        st.trace_pending = {}


def _first_nodes(objs):
    """Each object of ``objs`` that has a ``grad_fn``, with it (None for a
    tensor outside a graph), read with torch functions off: a subclass's
    ``__torch_function__`` must not run inside the probe."""
    torch = sys.modules.get("torch")
    if torch is None:
        return []
    from ._census import _no_torch_function

    pairs = []
    with _no_torch_function(torch):
        for o in objs:
            try:
                pairs.append((o, o.grad_fn))
            except Exception:
                continue
    return pairs


def _grad_fns(objs):
    """The graphs' first nodes of these tensors. Held, not their ids: torch
    makes a node's Python object afresh once the last one is gone."""
    return [f for _, f in _first_nodes(objs) if f is not None]


def _moved_in_place(objs, walked):
    """The tensors of ``objs`` whose first node is no longer the one the
    census walked (``walked``, by id): heads the job updates in place
    (`total += loss`), so each is the head now itself."""
    moved = []
    for o, now in _first_nodes(objs):
        was = walked.get(id(o))
        if was is not None and now is not None and now is not was:
            moved.append(o)
    return moved


def _heads_reaching(fns):
    """The tensors alive now whose graphs reach one of the nodes ``fns``
    a few nodes back: a chain's head now, where ``fns`` are its head's a
    few steps ago (each step's ``torch.cat([history, x])`` puts one node
    and that step's graph before them). The head is a few steps old: the
    collector's young generations are looked in first, a tenth of the heap
    or less, and the whole heap only if it is not there. Each walk goes
    back breadth first, a little further each round (the head is the
    nearest; a tensor of a step's graph may reach back far), within
    CHAIN_LOOK_VISITS nodes in all: past those, or where no tensor newer
    than the listed head reaches it, the caller falls back on a whole
    census."""
    torch = sys.modules.get("torch")
    if torch is None:
        return []
    from ._census import _no_torch_function

    targets = set(map(id, fns))
    tensor = torch.Tensor
    kinds = {}
    budget = [CHAIN_LOOK_VISITS]
    tensors = []
    for gen in (0, 1, 2):
        objs = gc.get_objects(gen)
        try:
            # By type, never by `isinstance`, which asks a proxy its
            # `__class__` (user code).
            for o in objs:
                tp = type(o)
                is_t = kinds.get(tp)
                if is_t is None:
                    is_t = kinds[tp] = tensor in getattr(tp, "__mro__", ())
                if is_t:
                    tensors.append(o)
        finally:
            objs = o = None
        with _no_torch_function(torch):
            found = False
            for depth in CHAIN_LOOK_DEPTHS:
                heads = [t for t in tensors if _reaches(t, targets, depth, budget)]
                found = found or bool(heads)
                # A head listed is no head now (alive, where the job rebound
                # it, only in the census's snapshot of the locals); where
                # none is newer, the job did not rebind it: not a chain the
                # look can follow.
                newer = [t for t in heads if id(t.grad_fn) not in targets]
                heads = None
                if newer or budget[0] <= 0:
                    tensors = None
                    return newer
            if found:
                break
    tensors = None
    return []


def _reaches(t, targets, cap, budget):
    """Whether the graph of tensor ``t`` reaches a node whose id is in
    ``targets`` within ``cap`` nodes, breadth first; each node visited
    spends one of ``budget[0]``."""
    try:
        f = t.grad_fn
        if f is None:
            return False
        seen = {id(f)}
        todo = collections.deque([f])
        while todo and len(seen) <= cap and budget[0] > 0:
            f = todo.popleft()
            budget[0] -= 1
            if id(f) in targets:
                return True
            for nf, _ in f.next_functions:
                if nf is not None and id(nf) not in seen:
                    seen.add(id(nf))
                    todo.append(nf)
    except Exception:
        pass
    return False


def _chain_look(st, chain, step):
    """The holders of a chain's suspects (``chain``) that a census in slices
    listed, whose head the job rebound since (``history = torch.cat(
    [history, x])``): the head alive now, whose graph reaches the listed
    one's, is searched at once, in one piece (the job pauses for one look
    at the young objects and the referrers, not for a whole census). What
    it does not name is left to the next census, run whole."""
    looked = []
    values = None
    try:
        with _gc_paused():
            for key, per, count, info in chain:
                fns = _grad_fns(info["objects"])
                heads = _heads_reaching(fns) if fns else []
                fns = None
                if heads:
                    looked.append((key, per, count, {"objects": heads, "kind": "instances",
                                                     "best": len(heads),
                                                     "saved_by_graph": False}))
                else:
                    st.whole_next = True
                    st.deferred.add(key)
                heads = None
            if looked:
                from ._holders import snapshot_locals

                from . import _steps

                frame_locals, values = snapshot_locals(st.libs)
                kept = _steps.kept
                _steps.kept = kept | {id(frame_locals), id(values)}
                try:
                    for _ in _suspects_steps(st, looked, step, frame_locals, retry=True):
                        pass
                finally:
                    _steps.kept = kept
    except Exception as e:
        st.whole_next = True
        st.deferred.update(s[0] for s in chain if s[0] not in st.census.suspect_keys)
        _note("warn", "chain holder search failed: %s" % _describe(e))
    looked = frame_locals = values = None


def _name_bounded_steps(st, frame_locals=None, sliced=False):
    """The holders of the bounded deques the census found filling with a
    MiB or more (`ReplayBuffer.memory`), looked for once each: the report
    tells memory that grows while one fills as that buffer filling. The
    name travels in the next censuses' `bounded` entries."""
    census = st.census
    todo = census.bounded_to_name
    if not todo:
        return
    census.bounded_to_name = []
    from . import _explain

    suspects = [(_explain.container_key(id(c)), 0.0, len(c),
                 {"objects": [c], "kind": "container"}) for c in todo]
    ids = [id(c) for c in todo]
    del todo
    try:
        found = yield from _explain.attribute_steps(st.libs, suspects, (), (), frame_locals,
                                                    sliced)
    finally:
        for s in suspects:
            s[3]["objects"] = []
        del suspects
    for cid, (holder, _bounded, _picked) in zip(ids, found):
        if holder is None or holder.get("library") or cid not in census.bounded_followed:
            continue
        h = _clean_holder(holder)
        census.bounded_followed[cid] = {k: h.get(k) for k in ("kind", "path", "file", "line")}
    del found


def _rising_containers(census):
    """Ids of the containers whose length series rises now."""
    out = []
    for k in census.growth.runs:
        if k.startswith("container:"):
            try:
                out.append(int(k[10:]))
            except ValueError:
                pass
    return out


def _refresh_pyplot(st):
    """Open figures keep more series than rose when their suspect was sent
    (a figure's partials, weak references, dicts rise a few censuses
    later): the pyplot holder is sent again with all it keeps now, going
    down from pyplot's registry, when a series rises that it did not list."""
    msg = st.sent.get("figures")
    census = st.census
    if msg is None or census is None:
        return
    holder = msg.get("holder") or {}
    have = set(holder.get("reaches") or ())
    rising = [k for k in census.growth.runs
              if k not in have and k not in census.suspect_keys and k not in st.pyplot_checked
              and (k.startswith(("type:", "container:")) or k == "numpy")]
    if not rising:
        return
    # (Each series is looked for once: one that pyplot does not keep is
    # not walked for at every census.)
    st.pyplot_checked.update(rising)
    from . import _explain

    names = set(k[5:] for k in rising if k.startswith("type:"))
    types = []
    for info in list(census._type_info.values()):
        t = info[0]()
        if t is not None and info[2] in names:
            types.append(t)
    with _gc_paused():
        found = _explain.pyplot_reaches(types, _rising_containers(census))
    del types
    new = sorted(have.union(found))
    if new != sorted(have):
        msg = dict(msg)
        msg["holder"] = dict(holder, reaches=new)
        st.sent["figures"] = msg
        _send(msg)


def _clean_holder(h):
    from . import _explain

    out = {}
    for k, v in h.items():
        if k.startswith("_"):
            continue  # the probe's own notes
        if k == "file" and isinstance(v, str) and v and v[0] != "<":
            v = _explain.file_name(v)
        if k == "also" and isinstance(v, list):
            v = [_clean_holder(x) for x in v if isinstance(x, dict)]
        elif isinstance(v, str):
            v = _clean(v)
        elif isinstance(v, list):
            v = [_clean(x) for x in v]
        out[k] = v
    return out


# -- creation sites (tracemalloc) ---------------------------------------------------


def _start_tracing(st):
    try:
        import tracemalloc
    except Exception:
        st.trace_pending = {}
        return
    if tracemalloc.is_tracing():
        if not st.trace_ours and not st.trace_noted:
            st.trace_noted = True
            _note("info", "tracemalloc was already running: creation sites taken from it")
    else:
        try:
            tracemalloc.start(TRACE_FRAMES)
            st.trace_ours = True
        except Exception:
            st.trace_pending = {}
            return
    st.trace_n = st.opt.n + st.man.n
    st.trace_t = _cpu()
    st.trace_wall = _monotonic()


def _stop_tracing(st):
    if not st.trace_ours:
        return
    st.trace_ours = False
    try:
        import tracemalloc

        tracemalloc.stop()
    except Exception:
        pass


def _resolve_sites(st):
    """A few steps after a suspect: where were its newest instances made?"""
    c0 = _cpu()
    # The steps run under tracemalloc were slower: what they took beyond the
    # step time before the census is the probe's cost too.
    window = c0 - st.trace_t
    steps = (st.opt.n + st.man.n) - st.trace_n
    if st.step_dt is not None and window > 0:
        _charge(st, "sites", min(max(window - steps * st.step_dt, 0.0), window))
    pending, st.trace_pending = st.trace_pending, {}
    lens, st.trace_lens = st.trace_lens, {}
    st.trace_steps = TRACE_STEPS
    from . import _explain

    try:
        import tracemalloc

        if tracemalloc.is_tracing():
            examples = dict((k, (st.sent.get(k) or {}).get("example")) for k in pending)
            containers = dict((k, v) for k, v in pending.items() if v is not None)
            with _gc_paused():
                sites = _explain.sites(st.libs, st.census, sorted(pending), tracemalloc,
                                       examples, None, containers, lens)
        else:
            sites = {}
    except Exception as e:
        sites = {}
        _note("warn", "creation sites failed: %s" % _describe(e))
    _stop_tracing(st)
    st.census.dirty = True
    for key, site in sorted(sites.items()):
        msg = st.sent.get(key)
        if msg is None or site is None:
            continue
        f, line, function = _explain.site_of(site)
        msg = dict(msg)
        msg["created_at"] = {"file": _clean(f), "line": line, "function": _clean(function)}
        thread = _explain.thread_of(site[0], line)
        if thread is not None:
            msg["created_at"]["thread"] = _clean(thread)
        st.sent[key] = msg
        _send(msg)
    _charge(st, "sites", _cpu() - c0)
    now = _monotonic()
    if st.burst_until:
        _burst_check(st, now)
    next_census = st.next_census
    _settle(st, now)
    _schedule(st, now)
    st.next_census = max(st.next_census, next_census)


# -- the timer thread (programs that never step) ---------------------------------------


def _start_timer(st):
    if not st.census_on or st.timer_alive or st.opt.n or st.man.n:
        return
    try:
        st.wake = _thread.allocate_lock()
        st.wake.acquire()
        st.exited = _thread.allocate_lock()
        st.exited.acquire()
        st.timer_stop = False
        st.timer_alive = True
        _thread.start_new_thread(_timer_main, (st, st.wake, st.exited))
    except Exception:
        st.timer_alive = False


def _stop_timer(st):
    st.timer_stop = True
    w = st.wake
    if w is not None:
        try:
            w.release()
        except Exception:
            pass


def _timer_main(st, wake, exited):
    last_modules = -1
    try:
        while True:
            if (st.timer_stop or not st.active or not st.census_on or st.exiting
                    or st.opt.n or st.man.n):
                break
            now = _monotonic()
            if st.forked and st.channel.sock is None and now - st.t_start >= FIRST_TIMER_S:
                # A forked child says hello once it has lived a second (a
                # child that only execs another program never does), so the
                # monitor can ask it for a burst too.
                if not _reconnect(st, st.channel):
                    break
            _poll(st)
            if not st.active:
                break
            if st.census_job is not None:
                # A census under way: a slice, then a breath for the job's
                # own threads.
                if st.busy.acquire(False):
                    try:
                        if st.census_job is not None:
                            _census_slice(st)
                    finally:
                        st.busy.release()
                wake.acquire(True, SLICE_S)
                continue
            due = (st.next_census if st.census is not None and st.census.n
                   else max(st.t_start + FIRST_TIMER_S, st.next_census))
            if st.trace_pending:
                due = min(due, st.trace_wall + TRACE_TIMER_S)
            elif st.look_wanted:
                due = now
            wait = due - now
            if wait > 0:
                st.timer_sleeping = True
                # (Woken at least every second: the monitor may ask for a
                # burst or a last look.)
                wake.acquire(True, min(wait, 1.0))
                st.timer_sleeping = False
                continue
            n_modules = len(sys.modules)
            if n_modules != last_modules:
                # Imports under way (a census now would count half-made
                # modules as growth): wait until they settle.
                last_modules = n_modules
                wake.acquire(True, 0.5)
                continue
            if not st.busy.acquire(False):
                wake.acquire(True, 0.05)
                continue
            try:
                if st.opt.n or st.man.n or st.timer_stop:
                    break
                if st.trace_pending:
                    _resolve_sites(st)
                elif st.look_wanted:
                    _last_look(st, "timer", None)
                else:
                    _settle(st, _monotonic())
                    # A forked child's census lists every object it shares
                    # with its parent, writing each one's reference count:
                    # the kernel copies those pages (80 MiB a DataLoader
                    # worker in a small torch job). Its first runs when the
                    # monitor asks, seeing the child's own memory grow, never
                    # on its own; after that, the pages are copied and its
                    # budget rules, as in any process.
                    if st.credit >= 0.98 * st.expected and (not st.forked or st.bursts):
                        _census(st, "timer", None)
                    else:
                        _schedule(st, _monotonic())
                    st.next_census = max(st.next_census, _monotonic() + MIN_TIMER_GAP_S)
            finally:
                st.busy.release()
    except BaseException:
        pass
    finally:
        st.timer_alive = False
        st.timer_sleeping = False
        try:
            exited.release()
        except Exception:
            pass


# -- fork and exit ----------------------------------------------------------------------


def _before_fork():
    # A sleeping timer thread is stopped so that the fork happens from a
    # single-threaded process when the program itself has no other thread
    # (Python 3.12+ warns otherwise); it is started again in the parent.
    try:
        st = S
        if st is None or not st.active or not st.timer_alive or not st.timer_sleeping:
            return
        st.timer_paused = True
        exited = st.exited
        _stop_timer(st)
        if exited is not None:
            exited.acquire(True, 0.05)
    except Exception:
        pass


def _after_fork_parent():
    try:
        st = S
        if st is None or not st.timer_paused:
            return
        st.timer_paused = False
        if st.active and not st.timer_alive:
            _start_timer(st)
    except Exception:
        pass


def _after_fork_child():
    """A forked child (a DataLoader worker, a multiprocessing process) gets
    a probe of its own: its own budget, census and connection (made when
    it first has something to say), and its timer thread, since workers
    rarely step. The parent's connection is forgotten, not closed."""
    global S
    try:
        old = S
        if old is None or not old.active:
            return
        frames = _fork_frames()
        old.channel.reset_after_fork()  # the parent's connection is not ours
        _stop_tracing(old)  # (a tracemalloc the parent started)
        st = _State(old.channel.path, old.budget, old.census_wanted)
        st.channel = old.channel
        st.forked = True
        st.attached = old.attached
        st.fork_frames = frames
        st.libs = old.libs
        st.opt_handle, st.finder = old.opt_handle, old.finder
        st.optimizers = old.optimizers
        if not st.census_on:
            st.due = _INF
        S = st
        old.active = False
        _start_timer(st)
    except Exception:
        try:
            _switch_off()
        except Exception:
            pass


def _at_exit():
    try:
        st = S
        if st is None or not st.active:
            return
        st.exiting = True
        st.due = _INF
        _stop_timer(st)
        for c in (st.opt, st.man):
            if c.n > c.sent_n:
                c.sent_n = c.n
                _send({"kind": "step", "pid": st.pid, "step": c.n, "source": c.source})
        if (st.census_on and not st.looked and st.census is not None
                and (st.opt.n or st.man.n) and st.busy.acquire(True, 2.0)):
            try:
                # (A creation site still being traced is looked up first.)
                if st.trace_pending:
                    _resolve_sites(st)
                c = st.opt if st.opt.n else st.man
                _last_look(st, c.source, c.n, "exit")
            finally:
                st.busy.release()
        _stop_tracing(st)
        if st.census is not None:
            # Memory glibc holds freed: what malloc_trim(0) gives back, now
            # that the program has ended (it changes no object).
            try:
                from . import _malloc

                st.malloc_trim = _malloc.trim_experiment()
            except Exception:
                pass
        if not st.forked or st.census is not None:
            _send_cost(st, _monotonic())
        if st.active:
            st.channel.drain(1.0)
            st.channel.close()
    except Exception:
        pass
