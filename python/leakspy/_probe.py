"""The in-process probe: steps, censuses, suspects, holders, creation sites.

Started by the bootstrap ``sitecustomize`` when ``LEAKSPY_PROBE_SOCKET`` is
set (``leakspy run``); does nothing otherwise. Nothing here may raise into
the user's code, print, or change what the program does: every entry point
(hooks, the timer thread, fork and exit handlers) swallows its own errors,
and a broken channel switches the probe off for good in that process.
"""

import atexit
import gc
import os
import sys
import time

try:
    import _thread
except ImportError:  # pragma: no cover
    _thread = None

from . import __version__
from ._autograd import ALL_GRAPHS, GRAPH_KEYS
from ._channel import Channel

_monotonic = time.monotonic
_perf = time.perf_counter
# The probe's work is charged in this thread's CPU time: wall time would also
# charge it the moments the job waits for a CPU that other programs hold.
_cpu = time.thread_time
_INF = float("inf")

# One step message per 0.1 s at most, the monitor's own sampling interval: a
# message costs the job a socket write and a wake-up of the monitor (tens of
# microseconds, more on a busy machine), and finer steps add nothing to a
# per-step fit of 10 Hz samples.
STEP_COALESCE_S = 0.1
FIRST_CENSUS_STEPS = 3
# What a census costs at torch's baseline after a first step (~0.1 s,
# docs/probe.md): the first census waits until the budget has paid for it,
# so a short or healthy job never spends more than its budget on the probe.
FIRST_CENSUS_COST_S = 0.1
# What the optimizer hook and `leakspy.step()` cost per call, charged to the
# budget by count: the upper end of python/tests/bench_probe.py's figures
# (0.4-1.0 us), since timing each call would cost as much as the call.
STEP_COST_S = 1e-6
# A census also slows the steps right after it (the caches it evicted refill;
# 5-66 % of its own time on a training loop, bench/probe_excess.py): the
# probe times this many steps after each census against the step time
# before it and charges what they took beyond it.
AFTER_STEPS = 30
EXAMPLE_NODE_CAP = 100000  # nodes counted in a suspect's example graph
TRACE_STEPS = 3
TRACE_TIMER_S = 1.0
FIRST_TIMER_S = 1.0
MIN_TIMER_GAP_S = 0.1
MAX_GAP_S = 3600.0
TRACE_FRAMES = 25
MAX_FAILURES = 3

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
        self.credit = 0.0
        self.expected = FIRST_CENSUS_COST_S
        self.acct_t = now
        self.acct_probe = 0.0
        self.step_t = now  # end of the last census: the step rate between censuses
        self.step_n = 0
        self.step_dt = None  # seconds per step before the last census
        self.after_left = 0  # steps after a census still to be timed
        self.after_t = 0.0
        self.after_excess = 0.0
        # What the last census cost on its own, and what the steps after it
        # lost (its cache misses): `expected` is their sum.
        self.census_cpu = FIRST_CENSUS_COST_S
        self.after_cost = 0.0
        if census is None:
            census = os.environ.get("LEAKSPY_PROBE_CENSUS", "1").strip() != "0"
        self.census_on = bool(census) and self.budget > 0
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
        self.trace_ours = False
        self.trace_n = 0
        self.trace_t = 0.0
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
        b = float(os.environ.get("LEAKSPY_PROBE_BUDGET", "0.01") if given is None else given)
    except (TypeError, ValueError):
        return 0.01
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
    }


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
        _after_census_step(st, now)
    if now - c.sent_t >= STEP_COALESCE_S:
        c.sent_t = now
        c.sent_n = c.n
        t0 = _cpu()
        _send({"kind": "step", "pid": st.pid, "step": c.n, "source": c.source})
        st.spent += _cpu() - t0
    if now >= st.due:
        _on_due(st, c)


def _after_census_step(st, now):
    st.after_excess += (now - st.after_t) - st.step_dt
    st.after_t = now
    st.after_left -= 1
    if not st.after_left:
        # Noise can make a window come out faster than usual: never a refund.
        st.after_cost = max(st.after_excess, 0.0)
        st.spent += st.after_cost
        st.after_excess = 0.0
        # The next census waits until the credit covers this too: else every
        # census would overdraw the budget by what the steps after it lose.
        st.expected = st.census_cpu + st.after_cost


def _manual_step():
    try:
        _step(S.man)
    except Exception:
        pass


_is_compiling = None  # torch.compiler.is_compiling, once torch.optim is in


def _optimizer_hook(optimizer, args, kwargs):
    try:
        # Not inside code torch.compile traces: the probe's bookkeeping must
        # not become part of a compiled graph.
        if _is_compiling is not None and _is_compiling():
            return
        _step(S.opt)
    except Exception:
        pass


def _on_due(st, c):
    """A step when a census (or the end of a creation-site trace) may be due."""
    if not st.census_on or st.forked or st.exiting:
        st.due = _INF
        return
    if not st.busy.acquire(False):
        return  # a census is under way (another thread)
    try:
        if st.trace_pending and (st.opt.n + st.man.n) - st.trace_n >= TRACE_STEPS:
            _resolve_sites(st)
        elif c.n >= FIRST_CENSUS_STEPS and _census_paid(st):
            _census(st, c.source, c.n)
        _set_due(st)
    finally:
        st.busy.release()


def _probe_seconds(st):
    """All the probe has cost this process's threads so far: the work it
    timed, and its step hooks counted at their measured cost."""
    return st.spent + (st.opt.n + st.man.n) * STEP_COST_S


def _settle(st, now):
    """Brings the census credit up to ``now``: the job's own time since the
    last settlement earns ``budget`` of it, the probe's work since then
    spends it. So over a run the probe's work stays within ``budget`` of the
    job's own time, whatever each census costs. The credit never exceeds
    one census, so a stretch without steps (evaluation, a long data load)
    does not buy a burst of censuses afterwards."""
    probe = _probe_seconds(st)
    d_probe = probe - st.acct_probe
    d_job = (now - st.acct_t) - d_probe
    st.credit = min(st.credit + st.budget * d_job - d_probe, st.expected)
    st.acct_t, st.acct_probe = now, probe


def _schedule(st, now):
    """The next census: when the job's time will have paid for it."""
    owed = st.expected - st.credit
    st.next_census = now + (owed / st.budget if owed > 0 else 0.0)


def _census_paid(st):
    now = _monotonic()
    if st.step_n == 0:
        # The step rate is timed from here (the third step), not from the
        # probe's start: imports and data loading came before. So is the
        # credit: the budget is a share of the training loop's time, and the
        # start-up earns nothing the loop would then pay for.
        st.step_t, st.step_n = now, st.opt.n + st.man.n
        _settle(st, now)
        st.credit = min(st.credit, 0.0)
    if now < st.next_census:
        return False
    _settle(st, now)
    if st.census is None or st.census.n == 0:
        # The first census is the loop's baseline, taken at once: the loop
        # pays it back before the next one.
        return True
    # Steps since the schedule was made cost a little: a census that is
    # nearly paid for waits, it does not run on credit.
    if st.credit < 0.98 * st.expected:
        _schedule(st, now)
        return False
    return True


def _send_cost(st, now):
    _send({"kind": "cost", "pid": st.pid, "probe_s": round(_probe_seconds(st), 6),
           "wall_s": round(now - st.t_start, 6), "budget": st.budget,
           "censuses": st.census.n if st.census is not None else 0})


def _set_due(st):
    if not st.census_on or not st.active:
        st.due = _INF
    elif st.trace_pending or st.census is None or st.census.n == 0:
        st.due = 0.0  # look at every step
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

            here = os.path.dirname(os.path.abspath(__file__)) + os.sep
            st.libs = Libraries(here)
            st.census = Census(st.libs)
        except Exception as e:
            st.census_on = False
            _note("warn", "census disabled: %s" % _describe(e))
            return False
    return True


def _census(st, source, step):
    if not _ensure_census(st):
        return
    n = st.opt.n + st.man.n
    if n > st.step_n:
        st.step_dt = (_monotonic() - st.step_t) / (n - st.step_n)
    t0 = _perf()
    c0 = _cpu()
    try:
        with _gc_paused():
            fields, suspects = st.census.run(want_picks=True)
    except Exception as e:
        st.spent += _cpu() - c0
        _census_failed(st, e)
        return
    cost = _perf() - t0
    census_cpu = _cpu() - c0
    msg = {"kind": "census", "pid": st.pid, "step": step, "source": source,
           "cost_s": round(cost, 6), "n": st.census.n, "dropped": st.channel.take_dropped()}
    msg.update(fields)
    _send(msg)
    del fields
    if suspects:
        try:
            _suspects(st, suspects, step)
        except Exception as e:
            _note("warn", "suspect search failed: %s" % _describe(e))
        del suspects
    total = _perf() - t0
    st.spent += _cpu() - c0
    # The next census is expected to cost what this one did without its
    # holder search (a search is rare; the credit pays it back), and what
    # the steps after the last one lost.
    st.census_cpu = max(census_cpu, 1e-4)
    st.expected = st.census_cpu + st.after_cost
    if total / st.budget > MAX_GAP_S:
        st.census_on = False
        _note("warn", "census disabled: budget exhausted (one census took %.1f s)" % total)
    now = _monotonic()
    _settle(st, now)
    _schedule(st, now)
    st.step_t, st.step_n = now, st.opt.n + st.man.n
    if st.trace_pending:
        # The traced steps are timed from here, after the census that
        # started tracing (its own time is charged above), and they stand
        # for the steps after it.
        st.trace_t = now
    elif step is not None and st.step_dt is not None:
        st.after_t, st.after_left, st.after_excess = now, AFTER_STEPS, 0.0
    _send_cost(st, now)


def _census_failed(st, e):
    st.failures += 1
    _note("warn", "census failed: %s" % _describe(e))
    if st.failures >= MAX_FAILURES:
        st.census_on = False
        _note("warn", "census disabled after %d failures" % st.failures)
    st.next_census = _monotonic() + 5.0


def _suspects(st, suspects, step):
    from ._holders import Searcher

    census = st.census
    # Instances of types whose count rises (records, copies of an agent, its
    # optimizer) are passed through on the way up, not taken for roots.
    through_types = census.rising_types
    census.rising_types = set()
    searcher = Searcher(st.libs, through_types)
    groups = [s[3]["objects"] for s in suspects]
    try:
        with _gc_paused():
            holders = searcher.search(groups)
    finally:
        searcher.close()
    del groups
    # Tensors that only an autograd graph holds (its saved tensors) are held
    # by whatever holds the graph.
    # (All graphs' holder first: the largest graph's is one tensor's.)
    graph_holder = None
    for keys in (ALL_GRAPHS, ("graph.largest",)):
        for (key, _, _, _), holder in zip(suspects, holders):
            if graph_holder is None and key in keys and holder is not None:
                graph_holder = holder
    for key in GRAPH_KEYS:
        if graph_holder is None and key in st.sent:
            h = st.sent[key]["holder"]
            if h.get("kind") not in (None, "unknown"):
                graph_holder = h
    for (key, per, count, info), holder in zip(suspects, holders):
        bounded = False
        if holder is None and graph_holder is not None and info.get("saved_by_graph"):
            holder = dict(graph_holder)
            holder["chain"] = [_type_of_first(info)] + ["graph"] + list(graph_holder["chain"])
            holder.pop("_bounded", None)
        if holder is not None:
            bounded = holder.pop("_bounded", False)
        if bounded:
            census.suppressed[key] = census.n + 10
            continue
        if info["kind"] == "figures":
            holder = {"kind": "pyplot",
                      "path": "matplotlib.pyplot (figure never closed: plt.close(fig))",
                      "container": None, "file": None, "line": None, "chain": ["Figure", "pyplot"]}
        elif holder is None:
            holder = {"kind": "unknown", "path": None, "container": None, "file": None,
                      "line": None, "chain": []}
        what, example = _describe_key(st, key, info, count)
        msg = {"kind": "suspect", "pid": st.pid, "step": step, "key": key, "what": what,
               "per_census": round(float(per), 3), "count": count, "holder": _clean_holder(holder),
               "created_at": None, "example": example}
        census.suspect_keys.add(key)
        st.sent[key] = msg
        _send(msg)
        _trace_later(st, key, info)
    for s in suspects:
        s[3]["objects"] = []
    census.dirty = True
    if st.trace_pending:
        _start_tracing(st)


def _type_of_first(info):
    objs = info.get("objects") or []
    return type(objs[0]).__name__ if objs else "?"


def _file_name(f):
    """A source file as the report names it: a notebook cell's code as
    ``Cell In[3]`` (``_ipython``), else its absolute path."""
    from ._ipython import display_file

    return display_file(f) or os.path.abspath(f)


def _clean_holder(h):
    out = {}
    for k, v in h.items():
        if k == "file" and isinstance(v, str) and v and v[0] != "<":
            v = _file_name(v)
        if isinstance(v, str):
            v = _clean(v)
        elif isinstance(v, list):
            v = [_clean(x) for x in v]
        out[k] = v
    return out


def _describe_key(st, key, info, count):
    kind, _, rest = key.partition(":")
    objs = info["objects"]
    example = None
    if objs:
        example = _example(st, objs[0])
    if kind == "type":
        what = rest
        if example and "dtype" in example:
            what = "%s (%s, %s%s)" % (rest, example["dtype"], example.get("device", "?"),
                                     ", grad_fn " + example["grad_fn"] if example.get("grad_fn")
                                     else "")
    elif kind == "tensors":
        dev, dt, g = (rest.split("/") + ["?", "?", "?"])[:3]
        label = {"grad": "with a grad_fn", "leaf": "requiring grad"}.get(g, "without grad")
        what = "%s %s tensors %s" % (dev, dt, label)
        if example and example.get("grad_fn"):
            what += " (%s)" % example["grad_fn"]
    elif kind in GRAPH_KEYS:
        what = {"graph": "autograd graph nodes", "graph.history": "autograd history",
                "graph.largest": "autograd nodes of the largest graph"}[kind]
        if example and example.get("grad_fn"):
            n = example.get("graph_nodes")
            if isinstance(n, int) and n >= EXAMPLE_NODE_CAP:
                n = "over %d" % EXAMPLE_NODE_CAP
            what += " (root %s, %s nodes)" % (example["grad_fn"], n)
    elif kind == "container":
        c = objs[0] if objs else None
        item = None
        if c is not None:
            item = _last_item(c)
        what = "%s (len %d)" % (type(c).__name__ if c is not None else "container", count)
        if item is not None:
            what = "%s of %s (len %d)" % (type(c).__name__, type(item).__name__, count)
        example = {"type": type(c).__name__ if c is not None else None, "len": count,
                   "item_type": type(item).__name__ if item is not None else None}
    elif kind == "modules":
        what = "%s modules (nn.Module)" % rest
    elif kind == "figures":
        what = "open matplotlib figures"
    elif kind == "numpy":
        what = "numpy arrays"
        if objs:
            try:
                a = objs[0]
                example = {"type": type(a).__name__, "shape": [int(d) for d in a.shape],
                           "dtype": str(a.dtype)}
            except Exception:
                pass
    else:
        what = key
    return _clean(what), example


def _last_item(c):
    """The newest element of a container the census follows (exact built-in
    types only: no user code runs)."""
    try:
        if isinstance(c, dict):
            return next(reversed(c.values())) if c else None
        if isinstance(c, (set, frozenset)):
            return next(iter(c)) if c else None
        return c[-1] if len(c) else None
    except Exception:
        return None


def _example(st, o):
    torch = sys.modules.get("torch")
    try:
        from ._census import _mro, _no_torch_function

        if torch is not None and torch.Tensor in _mro(type(o)):
            with _no_torch_function(torch):
                gf = o.grad_fn
                ex = {"type": type(o).__name__, "shape": [int(d) for d in o.shape],
                      "dtype": str(o.dtype).replace("torch.", ""), "device": str(o.device),
                      "grad_fn": type(gf).__name__ if gf is not None else None}
                if gf is not None:
                    ex["graph_nodes"] = _count_nodes(gf, EXAMPLE_NODE_CAP)
                return ex
    except Exception:
        pass
    try:
        return {"type": type(o).__name__}
    except Exception:
        return None


def _count_nodes(root, cap):
    from ._autograd import walk

    seen = set()
    walk(root, seen, cap)
    return len(seen)


# -- creation sites (tracemalloc) ---------------------------------------------------


def _trace_later(st, key, info):
    spec = {"kind": info["kind"]}
    k, _, rest = key.partition(":")
    if k == "container":
        spec["id"] = int(rest)
    elif k == "numpy" or key == "graph.largest":
        # (The largest graph's tensor is often made before tracing starts,
        # a total added to in place, and the biggest graph made while
        # tracing may be another chain's: no site rather than a wrong one.)
        return
    st.trace_pending[key] = spec


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
    st.trace_t = _monotonic()


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
    window = _monotonic() - st.trace_t
    steps = (st.opt.n + st.man.n) - st.trace_n
    if st.step_dt is not None and window > 0:
        st.spent += min(max(window - steps * st.step_dt, 0.0), window)
    pending, st.trace_pending = st.trace_pending, {}
    try:
        import tracemalloc

        if tracemalloc.is_tracing():
            with _gc_paused():
                sites = _sites(st, pending, tracemalloc)
        else:
            sites = {}
    except Exception as e:
        sites = {}
        _note("warn", "creation sites failed: %s" % _describe(e))
    _stop_tracing(st)
    st.census.dirty = True
    from ._holders import function_at

    for key, site in sorted(sites.items()):
        msg = st.sent.get(key)
        if msg is None or site is None:
            continue
        f, line = site
        msg = dict(msg)
        msg["created_at"] = {"file": _clean(_file_name(f)), "line": line,
                             "function": _clean(function_at(f, line))}
        st.sent[key] = msg
        _send(msg)
    st.spent += _cpu() - c0
    now = _monotonic()
    next_census = st.next_census
    _settle(st, now)
    _schedule(st, now)
    st.next_census = max(st.next_census, next_census)


SITE_CANDIDATES = 400


def _sites(st, pending, tracemalloc):
    """key -> (file, line): the most common user line among the tracebacks of
    the newest instances of each pending key (a few hundred at most)."""
    from itertools import compress, islice

    from ._census import _CONTAINER_SET, _CellType, _mro, type_name
    from ._holders import vote_site

    libs = st.libs
    torch = sys.modules.get("torch")
    objs = gc.get_objects()
    kinds = list(map(type, objs))
    out = {}
    types_present = set(kinds)
    tensor_types = set()
    module_types = set()
    if torch is not None:
        for t in types_present:
            mro = _mro(t)
            if torch.Tensor in mro:
                tensor_types.add(t)
            elif torch.nn.Module in mro:
                module_types.add(t)
    wanted = {}
    for key in pending:
        kind, _, rest = key.partition(":")
        if kind == "type":
            wanted[key] = {t for t in types_present if type_name(t) == rest}
        elif kind == "tensors" or kind in GRAPH_KEYS:
            wanted[key] = tensor_types
        elif kind == "modules":
            wanted[key] = {t for t in module_types if getattr(t, "__qualname__", None) == rest}
        elif kind == "container":
            wanted[key] = _CONTAINER_SET
    user_types = set()
    if any(k.startswith("container:") for k in pending):
        # Dicts of plain values are untracked: reached as in the census.
        user_types = {t for t in types_present if libs.is_user_type(t)}
        wanted["_untracked_sources"] = user_types | {_CellType}
    union = set()
    for ts in wanted.values():
        union.update(ts)
    sel = list(compress(objs, map(union.__contains__, kinds)))
    del objs, kinds
    sel_types = list(map(type, sel))
    by_id = None
    for key, spec in pending.items():
        kind, _, rest = key.partition(":")
        cands = []
        ts = wanted.get(key)
        if kind == "type" and ts:
            cands = compress(sel, map(ts.__contains__, sel_types))
            if ts & tensor_types:
                cands = _tensors_like(torch, cands, st.sent.get(key), SITE_CANDIDATES)
            else:
                cands = list(islice(cands, SITE_CANDIDATES))
        elif kind == "tensors" or kind in GRAPH_KEYS:
            all_t = compress(sel, map(tensor_types.__contains__, sel_types))
            dev_dt_kind = rest.split("/") if kind == "tensors" else None
            cands = _tensor_filter(torch, all_t, dev_dt_kind, kind in GRAPH_KEYS,
                                   SITE_CANDIDATES)
            # A chain's history is the biggest graphs'; all graphs together
            # are the youngest tensors' with a graph, as for their holder.
            if kind == "graph.history":
                cands = _biggest_graphs(cands, 3)
        elif kind == "modules" and ts:
            cands = list(islice(compress(sel, map(ts.__contains__, sel_types)), SITE_CANDIDATES))
        elif kind == "container":
            if by_id is None:
                conts = list(compress(sel, map(_CONTAINER_SET.__contains__, sel_types)))
                conts.extend(st.census._untracked_dicts(sel, sel_types, user_types))
                by_id = dict(zip(map(id, conts), conts))
                del conts
            c = by_id.get(spec.get("id"))
            if c is not None:
                cands = _newest_items(c, 20)
            del c
        elif kind == "figures":
            cands = _figures()
        # Items of a container vote before what they hold.
        site = vote_site(tracemalloc, libs, cands, kind == "container")
        del cands
        if site is not None:
            out[key] = site
    del sel, sel_types, by_id
    return out


def _tensors_like(torch, cands, sent, cap):
    """Among tensors of a rising type, those like the suspect's example."""
    from itertools import islice

    ex = (sent or {}).get("example") or {}
    if not ex.get("dtype"):
        return list(islice(cands, cap))
    from ._census import _no_torch_function

    out = []
    with _no_torch_function(torch):
        for t in cands:
            try:
                gf = t.requires_grad and not t.is_leaf
                if (str(t.dtype).replace("torch.", "") == ex["dtype"]
                        and gf == bool(ex.get("grad_fn"))):
                    out.append(t)
                    if len(out) >= cap:
                        break
            except Exception:
                continue
    return out


def _tensor_filter(torch, tensors, dev_dt_kind, graph_only, cap):
    from ._census import _no_torch_function

    out = []
    with _no_torch_function(torch):
        for t in tensors:
            try:
                gf = t.requires_grad and not t.is_leaf
                if graph_only:
                    if not gf:
                        continue
                elif dev_dt_kind is not None:
                    dev, dt, kind = (dev_dt_kind + ["?", "?", "?"])[:3]
                    k = "grad" if gf else ("leaf" if t.requires_grad else "plain")
                    if (k != kind or str(t.device) != dev
                            or str(t.dtype).replace("torch.", "") != dt):
                        continue
                out.append(t)
                if len(out) >= cap:
                    break
            except Exception:
                continue
    return out


def _biggest_graphs(tensors, n):
    """The roots whose walk reaches the most autograd nodes (shared nodes
    counted once, for the first root that reaches them)."""
    from ._autograd import grad_fn, walk

    seen = set()
    sized = []
    for t in tensors:
        root = grad_fn(t)
        if root is None or root in seen:
            continue
        n0 = len(seen)
        walk(root, seen, 100000)
        sized.append((len(seen) - n0, t))
    sized.sort(key=lambda p: -p[0])
    return [t for _, t in sized[:n]]


def _last_values(c, n):
    """The last ``n`` items (values for a dict) of an exact built-in
    container, newest first."""
    from itertools import islice

    try:
        if isinstance(c, dict):
            return list(islice(reversed(c.values()), n))
        if isinstance(c, (list, tuple)) or type(c).__name__ == "deque":
            k = len(c)
            return [c[i] for i in range(k - 1, max(-1, k - 1 - n), -1)]
    except Exception:
        pass
    return []


def _newest_items(c, n):
    """(level, object) for the newest elements of a container, then for what
    those hold when they are containers themselves (records, episodes): the
    element itself often comes from a free list, unknown to tracemalloc."""
    out = []
    level = [c]
    for depth in (1, 2, 3):
        nxt = []
        for parent in level:
            for v in _last_values(parent, n if depth == 1 else 5):
                out.append((depth, v))
                if type(v) in (list, tuple, dict):
                    nxt.append(v)
        level = nxt[:40]
    return out


def _figures():
    try:
        helpers = sys.modules.get("matplotlib._pylab_helpers")
        if helpers is None:
            return []
        return [m.canvas.figure for m in list(helpers.Gcf.figs.values())][-20:]
    except Exception:
        return []


# -- the timer thread (programs that never step) ---------------------------------------


def _start_timer(st):
    if st.forked or not st.census_on or st.timer_alive or st.opt.n or st.man.n:
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
            due = (st.next_census if st.census is not None and st.census.n
                   else st.t_start + FIRST_TIMER_S)
            if st.trace_pending:
                due = min(due, st.trace_t + TRACE_TIMER_S)
            wait = due - now
            if wait > 0:
                st.timer_sleeping = True
                wake.acquire(True, min(wait, 5.0))
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
                else:
                    _settle(st, _monotonic())
                    _census(st, "timer", None)
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
    try:
        st = S
        if st is None or not st.active:
            return
        st.pid = os.getpid()
        st.forked = True
        st.census_on = False
        st.due = _INF
        st.busy = _thread.allocate_lock()
        st.timer_alive = False
        st.timer_sleeping = False
        st.timer_paused = False
        st.wake = None
        st.exited = None
        st.trace_pending = {}
        st.sent = {}
        st.opt.reset()
        st.man.reset()
        _stop_tracing(st)
        st.connect_lock = _thread.allocate_lock()
        st.channel.reset_after_fork()  # the parent's connection is not ours
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
        _stop_tracing(st)
        if not st.forked:
            _send_cost(st, _monotonic())
        if st.active:
            st.channel.drain(1.0)
            st.channel.close()
    except Exception:
        pass
