"""``leakspy.assert_no_leak``: a leak check for the user's own tests.

It calls a training step many times, takes the probe's object census
(``_census.py``) at evenly spaced checkpoints, and fails when a series grows
with the calls up to the last one: what grows, by how much per call, who
holds it (the probe's holder search, ``_holders.py``) and where it was made.

Nothing here may leave objects the census counts behind between two
censuses: the figures of each census are kept in dicts of numbers only,
which the cyclic collector does not track (so ``gc.get_objects()`` never
lists them), in lists whose length never changes.
"""

import gc
import os
import sys
import time

from . import _explain
from ._census import GcPaused
from ._explain import parse

__all__ = ["assert_no_leak", "LeakError", "LeakReport", "Leak"]

DEFAULT_STEPS = 200
DEFAULT_WARMUP = 20
DEFAULT_CENSUSES = 16
MIN_INTERVALS = 5
# The verdict on what grows is the binary's (`leakspy_report::grows`, the
# rule of `run`, `report` and `diff` too), through this internal argument
# (`JUDGE_SERIES_ARG` there).
JUDGE_SERIES_ARG = "__leakspy-judge-series"
JUDGE_TIMEOUT_S = 120
# Candidates for instance tracking and creation sites, before the end (not
# the verdict): the last PRELIM_RISES intervals rise, and PRELIM_HALF_SHARE
# of the last half's.
PRELIM_RISES = 2
PRELIM_HALF_SHARE = 0.6
MAX_PICKED = 16
MAX_SHOWN_WITH = 5
TRACE_FRAMES = 25
TRACE_CANDIDATES = 5000
PRUNE_ROUNDS = 4

_NAN = float("nan")


class LeakError(AssertionError):
    """Raised by :func:`assert_no_leak` when something grows with every call.

    ``report`` is the :class:`LeakReport` of the run; ``report.leaks`` lists
    what grows, grouped by holder."""

    def __init__(self, message, report=None):
        AssertionError.__init__(self, message)
        self.report = report


LeakError.__module__ = "leakspy"


class Leak(object):
    """One holder and what grows under it.

    ``what``: the main series, in words; ``per_call``: its growth per call;
    ``key``: the census series (``tensors:cpu/float32/grad``, ``graph``,
    ``container:<id>``...); ``holder``: the holder search's answer (``kind``,
    ``path``, ``container``, ``file``, ``line``, ``chain``) or None;
    ``created_at``: ``(file, line, function)`` or None; ``also``: the other
    series under the same holder, as ``(what, per_call, key)``."""

    __slots__ = ("key", "what", "per_call", "holder", "created_at", "also")

    def __init__(self, key, what, per_call, holder, created_at, also):
        self.key = key
        self.what = what
        self.per_call = per_call
        self.holder = holder
        self.created_at = created_at
        self.also = also

    def __repr__(self):
        return "Leak(%r, per_call=%r, holder=%r)" % (
            self.what, self.per_call, (self.holder or {}).get("path"))


class LeakReport(object):
    """What :func:`assert_no_leak` saw: ``calls`` made, ``warmup`` calls not
    judged, the ``checkpoints`` (calls done at each census), the number of
    ``series`` judged, ``seconds`` in all and ``census_seconds`` of them,
    ``leaks`` (empty when nothing grows), ``growth``: ``{key: per call}`` of
    every series judged to grow (before grouping)."""

    def __init__(self, calls, warmup, checkpoints):
        self.calls = calls
        self.warmup = warmup
        self.checkpoints = tuple(checkpoints)
        self.series = 0
        self.seconds = 0.0
        self.census_seconds = 0.0
        self.leaks = []
        self.growth = {}

    def __repr__(self):
        return "LeakReport(calls=%d, warmup=%d, censuses=%d, series=%d, leaks=%d, %.2fs)" % (
            self.calls, self.warmup, len(self.checkpoints), self.series, len(self.leaks),
            self.seconds)


def _check_int(name, v):
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError("%s must be an integer, not %r" % (name, v))


def assert_no_leak(step, steps=DEFAULT_STEPS, warmup=DEFAULT_WARMUP, censuses=DEFAULT_CENSUSES,
                   creation_sites=True, _roots=None):
    """Calls ``step()`` ``steps`` times and raises :class:`LeakError` when
    something grows with the calls: objects of a type, tensors (by device,
    dtype and kind, and their bytes), autograd graph nodes, ``nn.Module``
    instances, numpy arrays, open matplotlib figures, or the length of a
    container.

    The first ``warmup`` calls are not judged (optimizer state, caches that
    fill once). ``censuses`` object censuses (each after ``gc.collect()``)
    are spread evenly over the remaining calls, the first right after the
    warm-up. ``creation_sites``: when something looks like it grows before
    the last interval, ``tracemalloc`` runs for that last interval to tell
    where the growing objects are made.

    Exceptions raised by ``step`` propagate unchanged. Returns a
    :class:`LeakReport` when nothing grows.

    ``_roots`` (for the pytest plugin): ``{name: object}``, named holders
    (the test's fixtures) for what only the test framework holds otherwise.
    """
    __tracebackhide__ = True  # pytest: the failure is the caller's
    if not callable(step):
        raise ValueError("step must be callable, not %r" % (step,))
    check_arguments(steps, warmup, censuses)
    binary = _binary()
    # Loaded before the first census: an import between two would count as
    # growth of the modules' objects.
    import json  # noqa: F401
    import subprocess  # noqa: F401

    k = min(censuses - 1, steps - warmup)
    judged = steps - warmup
    xs = [warmup + (i * judged + k // 2) // k for i in range(k + 1)]
    run = _Run(k, xs, bool(creation_sites), _roots)
    report = LeakReport(steps, warmup, xs)
    t0 = time.perf_counter()
    done = 0
    try:
        for i in range(k + 1):
            target = xs[i]
            while done < target:
                step()
                done += 1
            run.take(i)
        report.census_seconds = run.census_seconds
        run.conclude(report, binary)
    finally:
        run.close()
    report.seconds = time.perf_counter() - t0
    if report.leaks:
        raise LeakError(_message(_name(step), report), report)
    return report


def check_arguments(steps, warmup, censuses=DEFAULT_CENSUSES):
    """Raises ValueError for arguments assert_no_leak cannot work with."""
    _check_int("steps", steps)
    _check_int("warmup", warmup)
    _check_int("censuses", censuses)
    if warmup < 0:
        raise ValueError("warmup must be >= 0, not %d" % warmup)
    if steps <= warmup:
        raise ValueError("steps (%d) must be greater than warmup (%d)" % (steps, warmup))
    if steps - warmup < MIN_INTERVALS:
        raise ValueError("steps - warmup must be at least %d (calls judged), not %d"
                         % (MIN_INTERVALS, steps - warmup))
    if censuses < MIN_INTERVALS + 1:
        raise ValueError("censuses must be at least %d, not %d" % (MIN_INTERVALS + 1, censuses))


def _name(f):
    func = getattr(f, "func", None)  # functools.partial
    for o in (f, func):
        q = getattr(o, "__qualname__", None) or getattr(o, "__name__", None)
        if isinstance(q, str):
            return q
    return repr(f)


class _Run(object):
    def __init__(self, k, xs, creation_sites, roots=None):
        from ._census import Census, Libraries

        here = os.path.dirname(os.path.abspath(__file__)) + os.sep
        self.libs = Libraries(here)
        self.census = Census(self.libs)
        self.census.numpy_every = 1
        self.census.keep_values = True
        self.k = k
        self.xs = xs
        self.creation_sites = creation_sites
        # Per census: {series: number} and {container id: length}, dicts of
        # numbers only (untracked by the collector), in fixed-length lists.
        self.vals = [None] * (k + 1)
        self.conts = [None] * (k + 1)
        self.census_seconds = 0.0
        self.tracing = False  # tracemalloc started here
        self.traced = []  # keys whose creation sites the last interval traces
        self.sites = {}
        self.kinds = {}
        self.roots = dict(roots) if roots else {}
        self.frozen = False
        # Storage bytes by tensor id at the last census but one, for tensors
        # whose bytes may grow while their count does not (numbers only:
        # untracked by the collector).
        self.sizes = None

    # -- censuses --------------------------------------------------------

    def take(self, i):
        track = None
        if i >= max(2, self.k - 1):
            # Remember the instances of what looks like it grows, so that the
            # final picks are those born in the last interval.
            track = [key for key in self.prelim(i - 1) if _has_instances(key)][:12]
        t0 = time.perf_counter()
        if self.traced:
            # Before the census: under tracemalloc a census is ten times
            # slower.
            self.sites = self._trace_sites(self.traced)
            self.traced = []
            self._stop_tracing()
        gc.collect()
        if i == 0:
            self._freeze()
        else:
            self._prune()
        with GcPaused():
            fields, _ = self.census.run(want_picks=False, track=track)
        self._record(i, fields)
        del fields
        if i == self.k:
            self._thaw()  # the holder search needs gc.get_referrers to see all
        self.census_seconds += time.perf_counter() - t0
        if i == self.k - 1:
            groups = [parse(key).base.tensor_group() for key in self.prelim(i)
                      if key.startswith("bytes:tensors:")]
            if groups:
                self.sizes = {}
                for group in groups:
                    for t in self._tensors_of(group):
                        self.sizes[id(t)] = _nbytes(t)
                        self.sizes[-id(t)] = _sig(t)
        if i == self.k - 1 and self.creation_sites:
            cands = self._traceable(self.prelim(i))
            if cands:
                # Loaded now: compiling them under tracemalloc is slow.
                from . import _holders, _probe  # noqa: F401

                if self._start_tracing():
                    self.traced = cands

    def _record(self, i, fields):
        census = self.census
        vals = {}
        for key, v in (census.values or {}).items():
            if not key.startswith("container:"):
                vals[key] = v
        for g in fields.get("tensors") or ():
            key = "bytes:tensors:%s/%s/%s" % (g["device"], g["dtype"], "grad" if g["grad_fn"]
                                              else ("leaf" if g["requires_grad"] else "plain"))
            vals[key] = vals.get(key, 0) + g["bytes"]
        np_ = fields.get("numpy")
        if np_ is not None:
            vals["bytes:numpy"] = np_["bytes"]
        cuda = fields.get("cuda")
        if cuda is not None:
            vals["bytes:cuda"] = cuda["allocated"]
        mods = fields.get("modules")
        if mods is not None:
            vals["info:param_bytes"] = mods["param_bytes"]
        graph = fields.get("graph")
        if graph is not None:
            vals["info:saved_bytes"] = graph["saved_bytes"]
        self.vals[i] = vals
        self.conts[i] = dict(census.container_prev)
        census.values = None

    # -- judging ---------------------------------------------------------

    def _series(self, key, upto):
        if isinstance(key, int):
            out = []
            for c in self.conts[:upto + 1]:
                out.append(c.get(key, _NAN))
            return out
        return [v.get(key, 0) for v in self.vals[:upto + 1]]

    def _rising_keys(self, upto, rises):
        """Keys that rose at each of the last ``rises`` intervals up to
        census ``upto`` (a cheap first filter)."""
        if upto < rises:
            return []
        out = []
        for store in (self.vals, self.conts):
            last = store[upto]
            prev = [store[upto - j] for j in range(1, rises + 1)]
            default = 0 if store is self.vals else None
            for key, v in last.items():
                if store is self.vals and key.startswith("info:"):
                    continue
                cur = v
                ok = True
                for p in prev:
                    pv = p.get(key, default)
                    if pv is None or not cur > pv:
                        ok = False
                        break
                    cur = pv
                if ok:
                    out.append(key)
        return out

    def prelim(self, upto):
        """What may grow, on the censuses so far (a superset of what the
        final rule takes), best first."""
        if upto < MIN_INTERVALS - 1:
            return []
        out = []
        for key in self._rising_keys(upto, PRELIM_RISES):
            v = self._series(key, upto)
            if _may_grow(v):
                out.append(_skey(key))
        out.sort(key=lambda k: _tier(k, self._kind(k)))
        return out

    def final(self, binary):
        """What grows, {series: rate per call}: the binary's verdict on every
        series that changed (a constant one grows by no rule)."""
        keys = set()
        for v in self.vals:
            keys.update(k for k in v if not k.startswith("info:"))
        for c in self.conts:
            keys.update(c)
        series = {}
        for key in keys:
            v = self._series(key, self.k)
            if isinstance(key, int):
                v = [None if y != y else y for y in v]
            known = [y for y in v if y is not None]
            if known and min(known) != max(known):
                series[_skey(key)] = v
        if not series:
            return {}
        return {key: fit["slope"] for key, fit in
                _judge_series(binary, self.xs, series).items()}

    def rate(self, key):
        """Per-call rate over the last half (informational series too)."""
        k = self.k
        m = k // 2
        v = self._series(key, k)
        a, b = v[m], v[k]
        if a != a or b != b:
            return 0.0
        return (b - a) / float(self.xs[k] - self.xs[m])

    def _kind(self, key):
        """(kind, user) of a type series: kind is tensor, module, ndarray or
        None; user: a class of the user's code."""
        if not key.startswith("type:"):
            return (None, False)
        if not self.kinds:
            for _ref, _env, name, kind, user in list(self.census._type_info.values()):
                self.kinds[name] = (kind, user)
        return self.kinds.get(parse(key).name, (None, False))

    # -- the verdict -----------------------------------------------------

    def conclude(self, report, binary):
        growth = self.final(binary)
        report.series = len(self.vals[-1]) + len(self.conts[-1])
        report.growth = dict(growth)
        if not growth:
            return
        self.kinds = {}
        keys = self._telling(growth)
        pick_keys = []
        for key in keys:
            pk = _pick_key(key)
            if pk is not None and pk not in pick_keys:
                pick_keys.append(pk)
        with GcPaused():
            _, suspects = self.census.run(want_picks=False, keys=pick_keys)
        try:
            picked = {s[0]: s[3] for s in suspects}
            for key in keys:
                pk = _pick_key(key)
                if key.startswith("bytes:tensors:") and pk not in growth and pk in picked:
                    # Bytes grow, not the count: the tensors that grow are
                    # among the largest of their group, not the youngest.
                    picked[pk]["objects"] = self._growing_tensors(parse(pk).tensor_group())
            holders = self._holders(suspects, growth)
            examples = self._examples(picked)
            sites = self.sites
        finally:
            for s in suspects:
                s[3]["objects"] = []
            del suspects
        report.leaks = self._group(keys, growth, picked, holders, examples, sites)

    def _telling(self, growth):
        """The keys worth naming, best first: library types and the types of
        tensors and modules only when nothing more telling grows; bytes only
        where the count does not grow."""
        tiers = {k: _tier(k, self._kind(k)) for k in growth}
        keys = [k for k in growth if tiers[k] < 8]
        if not keys:
            keys = list(growth)
        out = []
        for k in keys:
            if k.startswith("bytes:"):
                base = parse(k).base.text
                if base in growth:
                    continue
            if tiers[k] == 8 and any(g.startswith(("tensors:", "modules:")) for g in growth):
                continue
            out.append(k)
        out.sort(key=lambda k: (tiers[k], -abs(growth[k]), k))
        return out[:MAX_PICKED]

    def _tensors_of(self, group):
        """Every tensor of one group ([device, dtype, kind])."""
        from itertools import compress

        from ._census import _mro

        torch = self.census._torch()
        if torch is None:
            return []
        with GcPaused():
            objs = gc.get_objects()
            if self.census.frozen:
                objs.extend(self.census.frozen)
            kinds = list(map(type, objs))
            tt = {t for t in set(kinds) if torch.Tensor in _mro(t)}
            out = _explain.tensor_filter(torch, compress(objs, map(tt.__contains__, kinds)),
                                         group, False, 1000000)
            del objs, kinds
        return out

    def _growing_tensors(self, group, n=3):
        """The tensors of a group whose storage grew in the last interval:
        those to trace when the bytes of a group grow and its count does not.
        A tensor grown in place keeps its id; one replaced by a larger one
        (``torch.cat``) is new, and unlike the tensors made again the same
        every call (gradients), no tensor of its size and rank went away."""
        before = self.sizes or {}
        grown = []
        new = []
        rest = []
        now = set()
        for t in self._tensors_of(group):
            nb = _nbytes(t)
            nd = _sig(t)
            old = before.get(id(t))
            if old is not None and before.get(-id(t)) != nd:
                old = None  # another tensor at a freed one's address
            else:
                now.add(id(t))
            if old is None:
                new.append((nb, nd, t))
            elif nb > old:
                grown.append((nb - old, nd, t))
            else:
                rest.append((nb, nd, t))
        gone = {}
        for i, nb in before.items():
            if i > 0 and i not in now:
                k = (before.get(-i), nb)
                gone[k] = gone.get(k, 0) + 1
        unlike = []
        new.sort(key=lambda p: p[0])
        for nb, nd, t in new:
            if gone.get((nd, nb), 0) > 0:
                gone[(nd, nb)] -= 1
            else:
                unlike.append((nb, nd, t))
        for group in (grown, unlike, new, rest):
            if group:
                group.sort(key=lambda p: -p[0])
                return [p[2] for p in group[:n]]
        return []

    def _holders(self, suspects, growth):
        # Instances of every type that grows (the copies of a model, its
        # layers, records) are passed through on the way up, not taken for
        # the holder.
        through = set()
        for ref, _env, name, _kind, _user in list(self.census._type_info.values()):
            if "type:" + name in growth:
                t = ref()
                if t is not None:
                    through.add(t)
        through.update(self.census.rising_types)
        self.census.rising_types = set()
        found = _explain.attribute(self.libs, suspects, through)
        del through
        holders = {}
        for s, (h, _bounded, _picked) in zip(suspects, found):
            key, info = s[0], s[3]
            if h is not None and info["kind"] == "container" and not h.get(
                    "container") and h.get("chain"):
                h["container"] = h["chain"][0]  # the container is what grows
            if self.roots and info["kind"] != "figures" and not self._user_held(h):
                # Held by the test framework (pytest keeps fixture values in
                # its own dicts): name the fixture instead.
                h = self._root_holder(info["objects"]) or h
            holders[key] = h
        del found
        return holders

    def _root_holder(self, objs):
        """The named root (a fixture) from which one of ``objs`` is reached
        in a few references down, else None."""
        want = set(map(id, objs))
        if not want:
            return None
        for name, value in self.roots.items():
            if id(value) in want:
                return {"kind": "fixture", "path": name, "container": None, "file": None,
                        "line": None, "chain": [type(value).__name__, "fixture"]}
            level = [value]
            seen = {id(value)}
            for _ in range(4):
                try:
                    refs = gc.get_referents(*level)
                except Exception:
                    break
                if want.intersection(map(id, refs)):
                    return {"kind": "fixture", "path": name,
                            "container": type(value).__name__, "file": None, "line": None,
                            "chain": ["fixture", type(value).__name__]}
                level = [o for o in refs if id(o) not in seen and not isinstance(
                    o, (type, str, bytes, int, float))][:20000]
                seen.update(map(id, level))
                del refs
            del level
        return None

    def _examples(self, picked):
        out = {}
        for key, info in picked.items():
            objs = info["objects"]
            if not objs:
                continue
            o = objs[0]
            if info["kind"] == "container":
                item = _explain.last_item(o)
                out[key] = {"type": type(o).__name__,
                            "item_type": type(item).__name__ if item is not None else None}
            else:
                ex = _explain.example_of(o)
                if ex is not None:
                    out[key] = ex
        return out

    def _traceable(self, keys):
        """The keys worth a creation site: one per census key, and types of
        libraries only when nothing more telling may grow."""
        out = []
        tiers = [_tier(k, self._kind(k)) for k in keys]
        best = min(tiers) if tiers else 9
        for key, tier in zip(keys, tiers):
            pk = _pick_key(key)
            if pk is None or pk in out or (tier >= 8 and best < 8):
                continue
            if key.startswith("bytes:tensors:") and pk not in keys:
                out.append(key)  # the tensors that grow, not all of the group
            else:
                out.append(pk)
        return out[:MAX_PICKED]

    def _trace_sites(self, keys):
        """key -> (file, line, function): for what may grow, the most common
        line of the user's code among the allocation tracebacks of its
        instances made while tracemalloc ran (the last interval's calls;
        the others have no traceback); for a container, of its newest
        items; for the bytes of a tensor group, of the tensors that grew."""
        try:
            import tracemalloc
        except Exception:
            return {}
        if not tracemalloc.is_tracing():
            return {}

        def growing(key):
            k = parse(key)
            if k.kind == "bytes" and k.base.kind == "tensors":
                return self._growing_tensors(k.base.tensor_group())
            return None

        with GcPaused():
            found = _explain.sites(self.libs, self.census, keys, tracemalloc, None, growing)
        out = {}
        for key, site in found.items():
            pk = _pick_key(key) if key.startswith("bytes:") else key
            out[pk] = _explain.site_of(site)
        return out

    def _group(self, keys, growth, picked, holders, examples, sites):
        groups = {}
        order = []
        for key in keys:
            pk = _pick_key(key)
            h = holders.get(pk) if pk is not None else None
            if key == "bytes:cuda":
                h = None
            if h is not None and h.get("kind") != "unknown":
                gk = (h.get("kind"), h.get("path"))
            else:
                gk = ("unknown", key)
            if gk not in groups:
                groups[gk] = []
                order.append(gk)
            groups[gk].append(key)
        # A figure never closed also grows pyplot's own registry (Gcf.figs)
        # and matplotlib's objects: the figures say it.
        if "figures" in growth:
            for gk in list(order):
                h = holders.get(_pick_key(groups[gk][0]) or "")
                if h and h.get("kind") == "class_attribute" and str(h.get("path", "")).startswith(
                        "Gcf."):
                    order.remove(gk)
        # Series held by the user's code name the leak; what only libraries
        # hold goes along with it (their own registries) unless it is all.
        user = [gk for gk in order if self._user_held(holders.get(_pick_key(groups[gk][0]) or ""))]
        if user:
            order = user
        leaks = []
        for gk in order:
            ks = sorted(groups[gk], key=lambda k: (_tier(k, self._kind(k)),
                                                   len(_chain(holders, k)), -growth[k]))
            main = ks[0]
            what = self._label(main, growth, examples)
            also = [(self._label(k, growth, examples, brief=True), growth[k], k) for k in ks[1:]]
            pk = _pick_key(main)
            h = holders.get(pk) if pk is not None and gk[0] != "unknown" else None
            site = None
            for k in ks:
                site = sites.get(_pick_key(k) or "")
                if site is not None:
                    break
            leaks.append(Leak(main, what, growth[main], h, site, also))
        return leaks

    def _user_held(self, h):
        if not h:
            return False
        if h.get("kind") in ("pyplot", "local", "closure", "global", "fixture"):
            return True
        f = h.get("file")
        return isinstance(f, str) and self.libs.is_user_file(f)

    def _label(self, key, growth, examples, brief=False):
        r = growth[key]
        ex = examples.get(_pick_key(key) or "") or {}
        k = parse(key)
        kind, rest = k.kind, k.name
        if kind == "tensors":
            dev, dt, g = k.device, k.dtype, k.grad
            name = ex.get("type") or "Tensor"
            inner = []
            if g == "grad":
                if ex.get("grad_fn"):
                    inner.append("grad_fn=%s" % ex["grad_fn"])
                if growth.get("graph") and r > 0:
                    inner.append("each keeping %s autograd nodes" % _num(growth["graph"] / r))
            elif g == "leaf":
                inner.append("requiring grad")
            extra = "%s %s" % (dev, dt)
            b = self.rate("bytes:" + key)
            if b > 0:
                extra += ", %s/call" % _bytes(b)
            if brief:
                label = {"grad": " with a grad_fn", "leaf": " requiring grad"}.get(g, "")
                return "%s %s tensors%s" % (dev, dt, label)
            return "%s %s/call (%s)" % (name, _plus(r), "; ".join(inner + [extra]))
        if kind == "graph":
            inner = []
            if ex.get("grad_fn"):
                inner.append("root %s, %s nodes" % (ex["grad_fn"], ex.get("graph_nodes", "?")))
            s = self.rate("info:saved_bytes")
            if s > 0:
                inner.append("%s/call saved for backward" % _bytes(s))
            text = "autograd graph nodes"
            if brief:
                return text
            if not any(k.startswith("tensors:") and k.endswith("/grad") for k in growth):
                # The graph grows, not the number of tensors: one tensor
                # carries the graphs of every call.
                inner.append("one tensor carrying the graph of every call, as `total += loss` "
                             "does: keep loss.item() or loss.detach()")
            return "%s %s/call%s" % (text, _plus(r), " (%s)" % "; ".join(inner) if inner else "")
        if kind == "modules":
            text = "%s (nn.Module)" % rest
            if brief:
                return text
            p = self.rate("info:param_bytes")
            return "%s %s/call%s" % (text, _plus(r), " (%s of parameters/call)" % _bytes(p)
                                     if p > 0 else "")
        if key == "numpy":
            text = "numpy arrays"
            if brief:
                return text
            inner = []
            if ex.get("dtype"):
                inner.append("%s %s" % (ex["dtype"], tuple(ex.get("shape") or ())))
            b = self.rate("bytes:numpy")
            if b > 0:
                inner.append("%s/call" % _bytes(b))
            return "%s %s/call%s" % (text, _plus(r), " (%s)" % ", ".join(inner) if inner else "")
        if key == "figures":
            return "open matplotlib figures" if brief else (
                "open matplotlib figures %s/call" % _plus(r))
        if kind == "container":
            ctype = ex.get("type") or "container"
            text = "%s of %s" % (ctype, ex["item_type"]) if ex.get("item_type") else ctype
            return ("%s length" % text) if brief else ("%s: length %s/call" % (text, _plus(r)))
        if kind == "type":
            tkind, user = self._kind(key)
            name = rest.rsplit(".", 1)[-1] if (user or tkind) else rest
            return name if brief else "%s %s/call" % (name, _plus(r))
        if key == "bytes:numpy":
            return "numpy array bytes %s/call" % _bytes(r)
        if key == "bytes:cuda":
            return "CUDA memory allocated %s/call (torch.cuda.memory_allocated)" % _bytes(r)
        if kind == "bytes":
            dev, dt, g = k.base.device, k.base.dtype, k.base.grad
            label = {"grad": "with a grad_fn", "leaf": "requiring grad"}.get(g, "")
            text = " ".join(x for x in ("%s %s tensors" % (dev, dt), label) if x)
            if brief:
                return "%s bytes" % text
            return ("%s: bytes %s/call with a flat count (a tensor that grows, e.g. a "
                    "torch.cat history)" % (text, _bytes(r)))
        return "%s %s/call" % (key, _plus(r))

    # -- gc.freeze -------------------------------------------------------

    def _freeze(self):
        """Moves every object alive now out of the collector's sight, so that
        each gc.collect() before a census walks only what the calls made
        (a full collection walks the whole heap: with torch loaded, as long
        as a census). The census counts the frozen objects from a list;
        those that only this list keeps alive are dropped from it before
        each census (_prune), so they die as they would have. A cycle among
        them that becomes garbage is not collected until the end: it counts
        as alive, but it cannot grow with the calls. Not done under the
        probe (its censuses would stop seeing the frozen objects) nor when
        the program froze objects itself (unfreezing at the end would undo
        that)."""
        try:
            if gc.get_freeze_count() or _probe_active():
                return
            objs = gc.get_objects()
            gc.freeze()
        except Exception:
            return
        self.census.frozen = objs
        self.frozen = True

    def _prune(self):
        """Drops the frozen objects that nothing but the census's list
        holds any more (a reference count of 2: the list's and the
        argument's), which frees them; what only they held follows at the
        next round."""
        from itertools import compress

        frozen = self.census.frozen
        for _ in range(PRUNE_ROUNDS):
            if not frozen:
                break
            held = list(map((2).__lt__, map(sys.getrefcount, frozen)))
            if all(held):
                break
            frozen = list(compress(frozen, held))
            self.census.frozen = frozen  # the old list goes, and what it alone held
            del held
        del frozen

    def _thaw(self):
        if not self.frozen:
            return
        self.frozen = False
        self.census.frozen = None
        try:
            gc.unfreeze()
        except Exception:
            pass

    # -- tracemalloc -----------------------------------------------------

    def _start_tracing(self):
        """True when tracemalloc runs (started here, or the user's)."""
        try:
            import tracemalloc

            if not tracemalloc.is_tracing():
                tracemalloc.start(TRACE_FRAMES)
                self.tracing = True
            return True
        except Exception:
            self.tracing = False
            return False

    def close(self):
        self._thaw()
        self._stop_tracing()

    def _stop_tracing(self):
        if not self.tracing:
            return
        self.tracing = False
        try:
            import tracemalloc

            if not tracemalloc.is_tracing():
                return
            # Under `leakspy run` the probe may have started to rely on this
            # tracemalloc for creation sites of its own: it gets it, and stops
            # it when done, as it does with its own.
            st = _probe_active()
            if st is not None and st.trace_pending and not st.trace_ours:
                st.trace_ours = True
                return
            tracemalloc.stop()
        except Exception:
            pass


def _sig(t):
    """A tensor's rank and its shape but the first dimension, the one that
    ``torch.cat`` and ``resize_`` grow (a string: the dict it goes in must
    stay untracked by the collector)."""
    try:
        return str(tuple(t.shape)[1:]) + "/%d" % t.dim()
    except Exception:
        return "?"


def _nbytes(t):
    try:
        return t.untyped_storage().nbytes()
    except Exception:
        return 0


def _probe_active():
    """The probe's state when it runs in this process (`leakspy run`)."""
    probe = sys.modules.get(__name__.rpartition(".")[0] + "._probe")
    st = getattr(probe, "S", None) if probe is not None else None
    return st if st is not None and getattr(st, "active", False) else None


def _may_grow(v):
    """Whether series ``v`` (values at the censuses so far; NaN where a
    container was not followed yet) may be growing: the last PRELIM_RISES
    intervals each rise, and most of the last half's. Candidates only, for
    instance tracking and creation sites before the end; the verdict is the
    binary's (``_judge_series``)."""
    k = len(v) - 1
    if k < PRELIM_RISES:
        return False
    for j in range(k, k - PRELIM_RISES, -1):
        if not v[j] > v[j - 1]:
            return False
    m = k // 2
    rises = 0
    for j in range(m + 1, k + 1):
        a, b = v[j - 1], v[j]
        if a != a or b != b:
            return False
        if b > a:
            rises += 1
    return rises >= PRELIM_HALF_SHARE * (k - m)


def _binary():
    """The ``leakspy`` binary, whose rule judges what grows; a clear error
    before any call of the step when there is none."""
    from .__main__ import find_binary

    path = find_binary()
    if path is None:
        raise RuntimeError(
            "assert_no_leak needs the leakspy binary, which judges what grows, and none was "
            "found (beside the leakspy package, $LEAKSPY_BIN, or on PATH): install leakspy with "
            "its binary (`pip install .` in a leakspy checkout), or set LEAKSPY_BIN to a built "
            "one (`cargo build`: target/debug/leakspy)")
    return path


def _judge_series(binary, xs, series):
    """{key: fit} of the series that grow, by the binary's rule."""
    import json
    import subprocess

    payload = json.dumps({"x": xs, "series": series})
    try:
        p = subprocess.run([binary, JUDGE_SERIES_ARG], input=payload.encode(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=JUDGE_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as e:
        raise RuntimeError("assert_no_leak could not run the leakspy binary %s to judge the "
                           "series: %s" % (binary, e))
    if p.returncode != 0:
        raise RuntimeError("the leakspy binary %s could not judge the series (exit %d): %s; "
                           "is it the same version as the leakspy package?"
                           % (binary, p.returncode, p.stderr.decode(errors="replace").strip()))
    return json.loads(p.stdout.decode())


def _skey(key):
    return "container:%d" % key if isinstance(key, int) else key


def _has_instances(key):
    return key.startswith(("type:", "tensors:", "modules:", "graph"))


def _pick_key(key):
    """The census key whose instances explain a series."""
    if key.startswith("bytes:tensors:"):
        return parse(key).base.text
    if key == "bytes:numpy":
        return "numpy"
    if key.startswith("bytes:") or key.startswith("info:"):
        return None
    return key


def _tier(key, kind):
    """Which series names a leak best (lower first): a module copy explains
    its parameters and dicts, a tensor its graph, a list's items its
    length."""
    tkind, user = kind
    if key.startswith("modules:"):
        return 0
    if key == "figures":
        return 1
    if key.startswith("tensors:"):
        return 2
    if key == "graph":
        return 3
    if key == "numpy":
        return 4
    if key.startswith("type:") and user:
        return 5
    if key.startswith("container:"):
        return 6
    if key.startswith("bytes:"):
        return 7
    if key.startswith("type:") and tkind in ("tensor", "module", "ndarray"):
        return 8
    return 9


def _chain(holders, key):
    h = holders.get(_pick_key(key) or "")
    return (h or {}).get("chain") or ()


def _num(x):
    if abs(x - round(x)) < 0.05:
        return "%d" % round(x)
    return "%.1f" % x


def _plus(x):
    if abs(x) >= 100:
        return "%+.0f" % x
    if abs(x) >= 0.1:
        return "%+.1f" % x
    return "%+.3g" % x


def _bytes(n):
    n = float(n)
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= size:
            return "%+.1f %s" % (n / size, unit)
    return "%+.0f B" % n


def _where(f, line):
    if not f:
        return None
    try:
        rel = os.path.relpath(f)
        if not rel.startswith(".."):
            f = rel
    except Exception:
        pass
    return "%s:%s" % (f, line) if line else f


def _holder_text(h):
    if h is None:
        return "holder not found (held from C, or only by a running frame or a reference cycle)"
    kind = h.get("kind")
    path = h.get("path")
    if kind == "pyplot":
        return "held by %s" % path
    if kind == "local":
        return "held by local variable %s" % path
    if kind == "fixture":
        return "held by fixture %s%s" % (path, " (%s)" % h["container"] if h.get("container")
                                          else "")
    if h.get("container"):
        return "held by %s (%s)" % (path, h["container"])
    return "held by %s" % path


def _message(name, report):
    xs = report.checkpoints
    n = len(report.leaks)
    lines = ["%s leaks: %s with every call (calls %d-%d judged, %d censuses)" % (
        name, "1 holder grows" if n == 1 else "%d holders grow" % n, xs[0] + 1, xs[-1], len(xs))]
    for i, lk in enumerate(report.leaks, 1):
        lines.append("  %d. %s %s" % (i, lk.what, _holder_text(lk.holder)))
        detail = []
        if lk.created_at is not None:
            f, line, fn = lk.created_at
            detail.append("made at %s in %s" % (_where(f, line), fn))
        h = lk.holder or {}
        if h.get("kind") in ("attribute", "global", "class_attribute") and h.get("file"):
            detail.append("%s is set at %s" % (h.get("path"), _where(h["file"], h.get("line"))))
        if detail:
            lines.append("     " + "; ".join(detail))
        if lk.also:
            shown = ["%s %s/call" % (w, _plus(r) if not k.startswith("bytes:") else _bytes(r))
                     for w, r, k in lk.also[:MAX_SHOWN_WITH]]
            more = len(lk.also) - MAX_SHOWN_WITH
            lines.append("     with it: %s%s" % (", ".join(shown),
                                                ", and %d more" % more if more > 0 else ""))
    return "\n".join(lines)
