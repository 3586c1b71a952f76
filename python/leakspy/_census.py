"""The object census: what is alive in this process, counted in one pass
over ``gc.get_objects()``, and which series have grown at every census
lately (the suspects).

Everything here runs inside a census and keeps no user object past it: the
object list and every list made from it are local and dropped on return,
except the few instances handed to the holder search, which the caller
drops in turn.
"""

import gc
import os
import sys
import weakref
from collections import Counter, OrderedDict, defaultdict, deque
from heapq import nlargest
from itertools import compress, filterfalse, islice

from ._autograd import ALL_GRAPHS, GRAPH_KEYS, grad_fn
from ._explain import parse
from ._autograd import STEP_NODES, oldest_steps, walk_steps
from . import _steps
from ._steps import is_ours


class GcPaused(object):
    """Pauses the cyclic collector while a census holds the list of every
    object (a collection would walk that list each time), and restores it
    as found."""

    def __enter__(self):
        self.was = gc.isenabled()
        if self.was:
            gc.disable()
        return self

    def __exit__(self, *exc):
        if self.was:
            gc.enable()
        return False

# A series is a suspect when it rose at each of the last RISES comparisons.
RISES = 3
# Containers are followed (by id) from this length on.
MIN_TRACKED_LEN = 8
# Bounded deques reported per census, and the items weighed for each.
MAX_BOUNDED = 8
BOUNDED_SAMPLE = 8
# A bounded deque holding this much is worth its holder's search (once).
NAME_BOUNDED_BYTES = 1 << 20
TOP_TYPES = 100
MAX_TYPES = 300
TOP_CONTAINERS = 20
GRAPH_NODE_CAP = 100000
HISTORY_HOP_CAP = 1000000  # about a second of hops, at a million steps chained
# A graph's history is 0 at every census of a correct loop, however big its
# graph (it keeps nothing made before the last census): two rises in a row
# are a chain, not noise.
HISTORY_RISES = 2
SAVED_NODE_CAP = 5000
SAVED_FREED_STREAK = 300
PICKS = 5
CANDIDATE_FACTOR = 6
SURVIVOR_CAP = 5000
MAX_NEW_SUSPECTS = 8
NUMPY_LEVEL_CAP = 50000
NUMPY_PROBE_EVERY = 5
# Tensors looked at between two pauses of a census (some 10-40 ms).
TENSOR_SLICE = 4000
# Graph nodes whose saved tensors are read between two pauses.
SAVED_STEP = 1000
# Referrers of a census's picks looked into between two pauses.
PREFER_STEP = 200

CONTAINER_TYPES = (list, dict, set, deque, OrderedDict, defaultdict, Counter)
_CONTAINER_SET = frozenset(CONTAINER_TYPES)
_NOT_USER_TOP = frozenset(
    """builtins __future__ _frozen_importlib _frozen_importlib_external torch
    torchvision torchaudio numpy scipy pandas matplotlib PIL sklearn jax
    tensorflow keras transformers accelerate lightning pytorch_lightning
    leakspy typing_extensions six triton sympy mpmath networkx""".split()
)


def tensor_key(dev, dt, requires_grad, has_grad_fn):
    """The series that counts tensors of this device, dtype and kind:
    ``tensors:cpu/float32/grad`` (made by autograd: it keeps a graph),
    ``.../leaf`` (requires grad, made by the user: parameters) or
    ``.../plain``. One place, for the census and for what a holder reaches."""
    kind = "grad" if has_grad_fn else ("leaf" if requires_grad else "plain")
    return "tensors:%s/%s/%s" % (dev, str(dt).replace("torch.", ""), kind)


def tensor_key_of(torch, t):
    """``tensor_key`` of one tensor (read as the census reads it: outside
    any torch-function mode, never its ``grad_fn``), or None."""
    try:
        with _no_torch_function(torch):
            rg = t.requires_grad
            return tensor_key(t.device, t.dtype, rg, rg and not t.is_leaf)
    except Exception:
        return None


def type_name(t):
    try:
        mod = t.__module__
        qn = t.__qualname__
    except Exception:
        return "?"
    if not isinstance(mod, str):
        mod = "?"
    if not isinstance(qn, str):
        qn = getattr(t, "__name__", "?")
    return mod + "." + qn


def _mro(t):
    try:
        return type.__dict__["__mro__"].__get__(t, type)
    except Exception:
        return ()


class Libraries(object):
    """Tells user code from the interpreter's and installed packages'."""

    def __init__(self, probe_dir):
        self.probe_dir = probe_dir
        roots = set()
        for mod in (os, gc):
            f = getattr(mod, "__file__", None)
            if f:
                roots.add(os.path.dirname(os.path.abspath(f)))
        for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix):
            if p:
                roots.add(os.path.join(p, "lib", "python%d.%d" % sys.version_info[:2]))
        # leakspy's own package is a library too, wherever it is imported
        # from (a checkout on PYTHONPATH as much as site-packages).
        roots.add(os.path.dirname(os.path.abspath(__file__)))
        self.stdlib = tuple(sorted(r.rstrip(os.sep) + os.sep for r in roots))
        self._modules = {}
        self._files = {}
        self._lib_dirs = None

    def _libdirs(self):
        if self._lib_dirs is None:
            dirs = []
            for name in ("torch", "numpy", "matplotlib"):
                m = sys.modules.get(name)
                f = getattr(m, "__file__", None) if m is not None else None
                if isinstance(f, str):
                    dirs.append(os.path.dirname(os.path.abspath(f)) + os.sep)
            # Only cache once torch is in: it is what matters most.
            if "torch" in sys.modules:
                self._lib_dirs = tuple(dirs)
            return tuple(dirs)
        return self._lib_dirs

    def is_user_file(self, filename):
        r = self._files.get(filename)
        if r is not None:
            return r
        r = self._is_user_file(filename)
        if len(self._files) < 10000:
            self._files[filename] = r
        return r

    def _is_user_file(self, filename):
        if not isinstance(filename, str) or not filename or filename[0] == "<":
            return False
        f = os.path.abspath(filename)
        if "site-packages" in f or "dist-packages" in f:
            return False
        if self.probe_dir and f.startswith(self.probe_dir):
            return False
        if f.startswith(self.stdlib):
            return False
        if f.startswith(self._libdirs()):
            return False
        return True

    def is_user_module(self, modname):
        r = self._modules.get(modname)
        if r is not None:
            return r
        if modname == "__main__":
            r = True
        elif not isinstance(modname, str) or modname.split(".", 1)[0] in _NOT_USER_TOP:
            r = False
        else:
            m = sys.modules.get(modname)
            f = getattr(m, "__file__", None) if m is not None else None
            r = self.is_user_file(f) if isinstance(f, str) else False
        if len(self._modules) < 10000:
            self._modules[modname] = r
        return r

    def is_user_type(self, t):
        try:
            return self.is_user_module(t.__module__)
        except Exception:
            return False


class Growth(object):
    """Series of one census value per key; tells which rose at every one of
    the last RISES comparisons (and for how many comparisons in a row)."""

    def __init__(self):
        self.prev = {}
        self.runs = {}
        self.streak = {}
        self.rose = set()
        self.at_cap = set()  # keys whose rise ran into a walk's cap
        # The last run of a chain's largest graph, kept when the graph
        # outgrew the walk's cap and the series stopped having values.
        self.largest_ended = None

    def update(self, values, taint=None, capped=()):
        """values: key -> number for this census. taint: keys whose rise this
        time does not count (imports under way). capped: keys whose count
        stopped at a walk's cap (an autograd graph too big to walk)."""
        prev = self.prev
        runs = self.runs
        streak = self.streak
        new_runs = {}
        new_streak = {}
        rose = set()
        at_cap = set()
        for key, v in values.items():
            p = prev.get(key)
            if key in capped:
                if key in self.at_cap and key in runs:
                    # Still at the cap: whether it grows cannot be seen any
                    # more, and the rise that reached the cap stands.
                    new_runs[key] = runs[key]
                    new_streak[key] = streak.get(key, 0)
                    at_cap.add(key)
                    continue
                if p is not None and v - p >= 1 and (taint is None or key not in taint):
                    at_cap.add(key)
            if p is None or v - p < 1:
                continue
            rose.add(key)
            if taint is not None and key in taint:
                # A rise that does not count neither counts nor breaks the
                # run: the probe keeps something after every census that
                # finds suspects, and a list the job fills at every census
                # would otherwise start over each time and never qualify.
                if key in runs:
                    new_runs[key] = runs[key]
                    new_streak[key] = streak.get(key, 0)
                continue
            run = runs.get(key)
            if run is None:
                run = [p, v]
            else:
                run.append(v)
                if len(run) > RISES + 1:
                    del run[0]
            new_runs[key] = run
            new_streak[key] = streak.get(key, 0) + 1
        if "graph.largest" in runs and "graph.largest" not in values:
            self.largest_ended = runs["graph.largest"]
        self.runs = new_runs
        self.streak = new_streak
        self.rose = rose  # rose this time, tainted or not
        self.at_cap = at_cap
        self.prev = values

    def rising(self, rises=None):
        """key -> (per_census, count, rises in a row) for keys that qualify:
        those that rose at each of the last RISES comparisons (``rises``
        when given; HISTORY_RISES for a graph's history), and those that
        rose at every comparison until they reached a walk's cap, twice at
        least (a graph that outgrows the walk between censuses would never
        qualify otherwise; the report reads such series the same way)."""
        out = {}
        for key, run in self.runs.items():
            need = HISTORY_RISES if key == "graph.history" else (rises or RISES)
            need = min(need, rises or need)
            if len(run) >= need + 1:
                out[key] = ((run[-1] - run[-1 - need]) / float(need), run[-1],
                            self.streak.get(key, 0))
            elif key in self.at_cap and len(run) >= 3:
                out[key] = ((run[-1] - run[0]) / float(len(run) - 1), run[-1],
                            self.streak.get(key, 0))
        return out


class Census(object):
    """State kept between censuses (numbers and names only, never objects)."""

    def __init__(self, libs):
        self.libs = libs
        self.n = 0
        # Censuses that are warm-up (imports, lazy first-step work): the
        # first, unless it came well into the job.
        self.warm_n = 1
        self.last_objects = 0
        self.growth = Growth()
        self.reported_types = set()
        self.container_prev = {}
        # Bounded deques: lengths at the last census, those followed (id ->
        # holder as named, or None), those a name was looked for, those to
        # name after this census (their holder search), the last report.
        self.bounded_prev = {}
        self.bounded_followed = {}
        self.bounded_tried = set()
        self.bounded_to_name = []
        self.bounded = []
        self.container_types = {}
        self.saved_names = {}
        self.modules_count = 0
        # Set when the probe itself kept something since the last census
        # (suspect messages, source lines, regular expressions): the next
        # comparison of library types does not count.
        self.dirty = False
        self.suspect_keys = set()
        # A series of all graphs was named through a graph other than the
        # biggest (one loss of a list): the biggest, a chain, may be held
        # elsewhere (a running statistic), and its history is a suspect of
        # its own.
        self.graphs_apart = False
        self.suppressed = {}
        self.numpy_seen = False
        self._type_info = {}
        self.own_tensors = {}  # id -> fingerprint: tensors our saved-tensor reads made
        self.saved_ids = set()
        # id of a tensor a graph saved -> the root tensor of that graph (for
        # the holder search: saved tensors have no referrers in Python, the
        # root that keeps their graph does); emptied at the census's end.
        self.saved_root = {}
        self.rising_types = set()  # set by a census with suspects, for their search
        self.survivors = {}  # key -> ids of its instances at the last census
        self.survivors_old = {}  # ... and at the one before
        self.survivors_first = {}  # ... and at the first that remembered them
        self.tensor_keys = []
        self.torch = None
        # The newest autograd node (its sequence number) seen at the last
        # census: a graph whose oldest node is older outlived a census.
        self.graph_newest = None
        # leakspy.assert_no_leak looks at arrays at every census, and wants
        # every series of each census (it judges growth itself).
        self.numpy_every = NUMPY_PROBE_EVERY
        self.keep_values = False
        self.values = None
        # Objects moved out of the collector's sight by gc.freeze(), counted
        # as well (assert_no_leak freezes what existed before its first call
        # so that its gc.collect() before each census walks only the rest).
        self.frozen = None

    # -- helpers ---------------------------------------------------------

    def _own_ids(self):
        """Ids of the census's own containers: every set, dict, list and
        deque it or its Growth holds (taken from their attributes, so one
        added later cannot be left out: a set made anew each census often
        lands at the old one's address and would read as the job's), the
        library index's tables, and the containers inside the survivor maps
        and series runs."""
        ids = set()
        for holder in (self, self.growth, self.libs):
            for v in vars(holder).values():
                if isinstance(v, (set, frozenset, dict, list, deque)):
                    ids.add(id(v))
        ids.update(map(id, self.survivors.values()))
        ids.update(map(id, self.survivors_old.values()))
        ids.update(map(id, self.survivors_first.values()))
        ids.update(map(id, self.growth.runs.values()))
        return ids

    def _classify_type(self, t, torch, env):
        """(weakref, env, name, kind, user) for a type, cached by id (the weak
        reference tells a type from a later one at the same address)."""
        name = type_name(t)
        kind = None
        mro = _mro(t)
        if torch is not None:
            try:
                if t is torch.UntypedStorage or getattr(torch._C._functions, t.__name__,
                                                        None) is t:
                    kind = "artifact"
                elif torch.autograd.function.BackwardCFunction in mro:
                    kind = "artifact"
                elif torch.Tensor in mro:
                    kind = "tensor"
                elif torch.nn.Module in mro:
                    kind = "module"
            except Exception:
                pass
        if kind is None and env[1]:
            nd = getattr(sys.modules.get("numpy"), "ndarray", None)
            if nd is not None and nd in mro:
                kind = "ndarray"
        user = kind is None and self.libs.is_user_type(t)
        try:
            ref = weakref.ref(t)
        except TypeError:
            return (lambda: None, env, name, kind, user)
        hit = (ref, env, name, kind, user)
        if len(self._type_info) > 50000:
            self._type_info.clear()
        self._type_info[id(t)] = hit
        return hit

    def _torch(self):
        t = sys.modules.get("torch")
        if t is None or not hasattr(t, "Tensor"):
            return None
        try:
            t.Tensor, t.nn.Parameter, t.nn.Module  # noqa: B018 - fully imported?
        except Exception:
            return None
        return t

    # -- the census ------------------------------------------------------

    def run(self, *args, **kwargs):
        """One census in one piece: ``slices``, run to its end."""
        return _steps.run(self.slices(*args, **kwargs))

    def slices(self, want_picks, keys=None, track=None, rises=None, warmup=True, last=False,
               also=None):
        """One census, as a generator that pauses (yields) between pieces of
        its work, so that the probe can let the job run a step between them
        (no piece takes much more than a few tens of milliseconds but the
        first: listing every object and counting their types). What is counted is what
        was alive when it started: the objects listed then are kept until it
        ends. Its value (``StopIteration.value``, what ``run`` returns) is
        (message fields, suspects), where suspects is a
        list of (key, per_census, count, info) for keys that qualify now and
        were not reported before; info holds the instances to trace to a
        holder (dropped by the caller).

        ``keys``: instead, the instances of exactly these keys (whoever
        decided that they grow), with per_census 0; the growth state is left
        as the last census made it. ``track``: keys whose instances to
        remember for the next census's picks (by default, with
        ``want_picks``, the series that rise). ``rises``: rises in a row
        that qualify a series (RISES by default). ``warmup``: whether the
        first census is warm-up (imports, lazy first-step work), not
        compared with; one taken well into the job is a baseline. ``last``:
        a last look, which counts every rise (at exit the interpreter may be
        importing as it prints a traceback; the holder search tells a
        library's own growth from the user's). ``also``: keys a census
        before it qualified and left to this one, picked even where they
        did not rise this time."""
        self.n += 1
        if self.n == 1:
            self.warm_n = 1 if warmup else 0
        first = self.n <= self.warm_n
        torch = self._torch()
        self.torch = torch
        own = self._own_ids()

        objs = gc.get_objects()
        if self.frozen:
            objs.extend(self.frozen)
        n_objects = len(objs)
        self.last_objects = n_objects
        kinds = list(map(type, objs))
        type_counts = Counter(kinds)
        yield  # (the listing, the one piece that cannot be cut, is about half of it)

        names = {}
        counts = {}
        user_names = set()
        user_types = set()
        tensor_types = set()
        module_types = set()
        nd_types = set()
        info = self._type_info
        env = (torch is not None, "numpy" in sys.modules)
        for t, c in type_counts.items():
            hit = info.get(id(t))
            if hit is None or hit[0]() is not t or hit[1] != env:
                hit = self._classify_type(t, torch, env)
            name, kind = hit[2], hit[3]
            names[t] = name
            if kind == "artifact":
                continue
            counts[name] = counts.get(name, 0) + c
            if kind == "tensor":
                tensor_types.add(t)
            elif kind == "module":
                module_types.add(t)
            elif kind == "ndarray":
                nd_types.add(t)
            if hit[4]:
                user_names.add(name)
                user_types.add(t)

        fields = {"objects": n_objects}
        self._drop_remembered(counts, names, fields)
        np_mod = sys.modules.get("numpy")
        nd = getattr(np_mod, "ndarray", None) if np_mod is not None else None
        if isinstance(nd, type):
            nd_types.add(nd)  # arrays are not tracked: found through containers

        # One pass over every object picks the few kinds looked at closer.
        wanted = set(_CONTAINER_SET)
        wanted.update(tensor_types, module_types, user_types, nd_types)
        wanted.add(_CellType)
        sel = list(compress(objs, map(wanted.__contains__, kinds)))
        del kinds
        sel_types = list(map(type, sel))
        yield

        # Tensors and autograd graphs.
        tensors = []
        roots = []
        if torch is not None:
            tensors = list(compress(sel, map(tensor_types.__contains__, sel_types)))
            if self.own_tensors:
                tensors = self._drop_own_tensors(tensors, counts, names, fields)
            fields["tensors"], roots, tensor_groups = yield from self._tensors(torch, tensors)
            fields["graph"], graph_best, graph_fns = yield from self._graph(
                torch, roots, tensor_types, tensors)
            yield
            mods = list(compress(sel, map(module_types.__contains__, sel_types)))
            fields["modules"], module_by_class = self._modules(torch, mods)
        else:
            fields["tensors"] = None
            fields["graph"] = None
            fields["modules"] = None
            tensor_groups = {}
            graph_best = []
            graph_fns = {}
            module_by_class = {}
            mods = []

        # Containers: the largest, and every one of some length by id; with
        # the dicts the collector does not track (only numbers and strings in
        # them) held by user objects, user globals and closures.
        conts = list(compress(sel, map(_CONTAINER_SET.__contains__, sel_types)))
        untracked = self._untracked_dicts(sel, sel_types, user_types)
        conts.extend(untracked)
        yield
        want_ids = keys is not None and any(parse(k).kind == "container" for k in keys)
        containers, cont_values, cont_objs, big = self._containers(conts, own, want_ids)
        yield

        # numpy arrays (not gc-tracked: reached from containers and user
        # objects). Until some are found, only every NUMPY_PROBE_EVERY-th
        # census looks (null in between): it is a fifth of a census's cost.
        fields["numpy"] = None
        arrays = []
        if nd_types and (self.numpy_seen or self.n % self.numpy_every == 1
                         or self.numpy_every <= 1):
            fields["numpy"], arrays = self._numpy(sel, sel_types, untracked, user_types,
                                                  nd_types)
            self.numpy_seen = fields["numpy"]["count"] > 0
            yield
        del big, untracked

        fields["containers"] = containers
        if self.bounded:
            fields["bounded"] = self.bounded
        fields["figures"] = _figures()
        fields["cuda"] = _cuda(torch)

        # Types reported: the most numerous, those reported before, suspects,
        # then user classes.
        top = nlargest(TOP_TYPES, counts.items(), key=_second)
        types = dict(top)
        for name in self.reported_types:
            types[name] = counts.get(name, 0)
        for key in self.suspect_keys:
            k = parse(key)
            if k.kind == "type":
                types[k.name] = counts.get(k.name, 0)
        if len(types) < MAX_TYPES:
            for name in sorted(user_names, key=counts.get, reverse=True):
                if len(types) >= MAX_TYPES:
                    break
                types[name] = counts[name]
        self.reported_types.update(types)
        fields["types"] = types

        # Growth.
        values = {}
        for name, c in counts.items():
            values["type:" + name] = c
        for g in tensor_groups.values():
            values[g["key"]] = g["count"]
        if fields["graph"] is not None:
            values["graph"] = fields["graph"]["nodes"]
        for cls, c in module_by_class.items():
            values["modules:" + cls] = c
        if fields["numpy"] is not None:
            values["numpy"] = fields["numpy"]["count"]
        if fields["figures"] is not None:
            values["figures"] = fields["figures"]
        values.update(cont_values)
        n_modules = len(sys.modules)
        taint = None
        if (n_modules != self.modules_count or self.dirty) and not last:
            # Imports under way: code objects, functions, dicts... grow for a
            # while. Only user classes, tensors and the rest count this time.
            taint = {"type:" + n for n in counts if n not in user_names}
            taint.update(k for k in cont_values)
        self.modules_count = n_modules
        self.dirty = False
        if self.keep_values:
            self.values = dict(values)
        g = fields["graph"]
        if g is not None:
            # Not series of their own for assert_no_leak, which judges the
            # nodes and their saved bytes.
            if "history" in g:
                values["graph.history"] = g["history"]
            if "largest" in g:
                values["graph.largest"] = g["largest"]
        if first:
            # Warm-up: the first census is not compared with (imports and
            # lazy set-up still add objects), except for the autograd graphs
            # alive at the step boundary, which set-up does not make: a graph
            # that outgrows the walk's cap within two censuses needs its
            # first value.
            values = {k: values[k] for k in GRAPH_KEYS if k in values}
        if keys is None:
            self.growth.update(values, taint, ("graph",) if g and g.get("capped") else ())

        suspects = []
        if keys is not None:
            for key in keys:
                info = self._picks(key, objs, sel, sel_types, type_counts, names, tensor_types,
                                   user_types, tensors, tensor_groups, graph_best, graph_fns,
                                   mods, cont_objs, arrays, roots)
                if info is None:
                    continue
                saved = self.saved_ids
                info["saved_by_graph"] = any(id(o) in saved for o in info["objects"])
                info["graph_roots"], info["graph_saved"] = self._graph_roots(info["objects"])
                suspects.append((key, 0.0, self.values.get(key, 0) if self.values else 0, info))
                yield
            if suspects:
                up = {parse(k).name for k in keys if parse(k).kind == "type"}
                self.rising_types = {t for t, n in names.items() if n in up}
                yield
                yield from _prefer_held(suspects, (objs, sel, sel_types, tensors, roots, mods,
                                                   arrays, graph_best, graph_fns, conts,
                                                   suspects))
        elif want_picks:
            rising = self.growth.rising(rises)
            tensor_names = {names[t] for t in tensor_types}
            rank = {k: _rank(k, user_names, tensor_names) for k in rising}
            # Library and builtin types rise along with whatever holds them:
            # they are suspects only when nothing more telling rises.
            explained = any(r < 2 for r in rank.values()) or any(
                _rank(k, user_names, tensor_names) < 2
                for k in self.suspect_keys if k in self.growth.rose)
            order = sorted(rising, key=lambda k: (rank[k], -rising[k][0], k))
            # Suspects a census in slices found and left to this one (it
            # runs whole): searched whether or not they rose again (a
            # chain's largest graph may dip as its head moves on).
            # A chain's largest graph that outgrew the walk's cap meanwhile
            # is measured by the history it keeps, and rose as much per
            # census as the largest graph did until then (the history has
            # one value yet).
            also = set(also or ())
            swapped = "graph.largest" in also and "graph.largest" not in values
            if swapped:
                also = (also - {"graph.largest"}) | {"graph.history"}
            order[:0] = [k for k in sorted(also) if k not in rising and k in values]
            rank.update((k, _rank(k, user_names, tensor_names)) for k in order if k not in rank)
            for key in order:
                if len(suspects) >= MAX_NEW_SUSPECTS:
                    break
                if key in self.suspect_keys or self.suppressed.get(key, 0) > self.n:
                    continue
                named = self.suspect_keys.intersection(ALL_GRAPHS) and not (
                    key == "graph.history" and self.graphs_apart)
                if key in ALL_GRAPHS and (named or any(s[0] in ALL_GRAPHS for s in suspects)):
                    continue  # the other series of all graphs named it
                per, count, streak = rising.get(key) or (
                    _rate(self.growth.runs.get(key) or (
                        swapped and key == "graph.history"
                        and self.growth.largest_ended)),
                    values[key], RISES)
                # ... and they wait two more censuses, for what holds them to
                # qualify first (a list reaches the followed length later).
                if rank[key] == 2 and (explained or streak < RISES + 2):
                    continue
                info = self._picks(key, objs, sel, sel_types, type_counts, names, tensor_types,
                                   user_types, tensors, tensor_groups, graph_best, graph_fns,
                                   mods, cont_objs, arrays, roots)
                if info is None:
                    continue
                saved = self.saved_ids
                info["saved_by_graph"] = any(id(o) in saved for o in info["objects"])
                info["graph_roots"], info["graph_saved"] = self._graph_roots(info["objects"])
                suspects.append((key, per, count, info))
                yield
            if suspects:
                up = {parse(k).name for k in self.growth.runs if parse(k).kind == "type"}
                self.rising_types = {t for t, n in names.items() if n in up}
                yield
                yield from _prefer_held(suspects, (objs, sel, sel_types, tensors, roots, mods,
                                                   arrays, graph_best, graph_fns, conts,
                                                   suspects))
        yield
        if track is not None or (want_picks and keys is None):
            # Remember which instances of the telling series that rise exist
            # now, so that the next census can prefer those that outlived it.
            tensor_names = {names[t] for t in tensor_types}
            survivors = {}
            for key in (track if track is not None else self.growth.runs):
                if len(survivors) >= 12:
                    break
                if key.startswith(("tensors:", "modules:", "graph")) or (
                        key.startswith("type:") and _rank(key, user_names, tensor_names) < 2):
                    cands = self._instances(key, objs, sel, sel_types, type_counts, names,
                                            tensor_types, user_types, tensors, tensor_groups,
                                            mods, roots, SURVIVOR_CAP)
                    survivors[key] = set(map(id, cands))
                    del cands
            self.survivors_old = self.survivors
            self.survivors = survivors
            self.survivors_first = {k: self.survivors_first.get(k, ids)
                                    for k, ids in survivors.items()}
        del objs, tensors, roots, conts, mods, cont_objs, graph_best, graph_fns, type_counts
        del arrays
        del sel, sel_types
        self.saved_ids = set()
        self.saved_root = {}
        self.tensor_keys = []
        return fields, suspects

    def _graph_roots(self, objs):
        """The root tensors of the graphs that saved these objects (each
        once): what keeps them, going up in Python; and those of the
        objects a graph saved."""
        roots = []
        saved = []
        seen = set()
        for o in objs:
            r = self.saved_root.get(id(o))
            if r is None:
                continue
            saved.append(o)
            if id(r) not in seen:
                seen.add(id(r))
                roots.append(r)
        return roots, saved

    # -- tensors ---------------------------------------------------------

    def _tensors(self, torch, tensors):
        """(groups, roots, info) of the tensors, as a generator that pauses
        every TENSOR_SLICE tensors (outside torch's function-mode guard,
        which must not stay on while the job runs)."""
        groups = {}
        seen = set()
        roots = []
        tkeys = self.tensor_keys = []  # group of each tensor, in census order
        for start in range(0, len(tensors), TENSOR_SLICE):
            if start:
                yield
            self._tensor_slice(torch, tensors[start:start + TENSOR_SLICE], groups, seen, roots,
                               tkeys)
        out = []
        info = {}
        for (dev, dt, rg, has_gf), (count, nbytes) in groups.items():
            d = str(dev)
            dts = str(dt).replace("torch.", "")
            key = tensor_key(dev, dt, rg, has_gf)
            out.append({"device": d, "dtype": dts, "requires_grad": bool(rg),
                        "grad_fn": bool(has_gf), "count": count, "bytes": nbytes})
            g = info.get(key)
            if g is None:
                info[key] = {"key": key, "count": count, "bytes": nbytes,
                             "match": [(dev, dt, rg, has_gf)]}
            else:  # two torch.device objects printing the same
                g["count"] += count
                g["bytes"] += nbytes
                g["match"].append((dev, dt, rg, has_gf))
        out.sort(key=lambda g: -g["bytes"])
        return out, roots, info

    def _tensor_slice(self, torch, tensors, groups, seen, roots, tkeys):
        with _no_torch_function(torch):
            for t in tensors:
                try:
                    dev = t.device
                    dt = t.dtype
                    rg = t.requires_grad
                    # (not t.grad_fn: reading it gives the node a Python
                    # wrapper that lives as long as the node)
                    has_gf = rg and not t.is_leaf
                    k = (dev, dt, rg, has_gf)
                except Exception:
                    tkeys.append(None)
                    continue
                tkeys.append(k)
                g = groups.get(k)
                if g is None:
                    g = groups[k] = [0, 0]
                g[0] += 1
                try:
                    sk, nb = _storage(t, dev)
                except Exception:
                    sk, nb = id(t), 0
                if sk not in seen:
                    seen.add(sk)
                    g[1] += nb
                if has_gf:
                    roots.append(t)

    def _drop_remembered(self, counts, names, fields):
        """Leaves out the sets of ids the census keeps of a series' first
        instances (``survivors_first``) once no newer census shares them:
        one more is kept whenever a series is first remembered, and the
        probe's own memory is no series of the job's."""
        newer = set(map(id, self.survivors.values()))
        newer.update(map(id, self.survivors_old.values()))
        kept = {id(v) for v in self.survivors_first.values()} - newer
        name = names.get(set)
        if kept and name in counts:
            counts[name] -= len(kept)
            fields["objects"] -= len(kept)

    def _drop_own_tensors(self, tensors, counts, names, fields):
        """Leaves out the tensors that exist only because an earlier census
        read them from a graph's saved tensors (torch keeps such Python
        objects as long as the graph; weak references to them do not
        survive that). They are known by id and a fingerprint."""
        own = self.own_tensors
        still = {}
        mask = []
        for t in tensors:
            fp = own.get(id(t))
            mine = fp is not None and fp == _fingerprint(t)
            mask.append(not mine)
            if mine:
                still[id(t)] = fp
                name = names.get(type(t))
                if name in counts:
                    counts[name] -= 1
                fields["objects"] -= 1
        self.own_tensors = still
        return list(compress(tensors, mask)) if still else tensors

    def _graph(self, torch, roots, tensor_types, tensors):
        """(fields, largest roots, the first node of each as walked) of the
        autograd graphs of ``roots``, as a generator that pauses every few
        thousand nodes."""
        if not roots:
            return {"roots": 0, "nodes": 0, "saved_bytes": 0, "largest": 0}, [], {}
        # Newest node first (torch's per-thread sequence numbers): the head
        # of a chain is walked before the intermediates it keeps, so its
        # count is the whole chain's (shared nodes count for the first root
        # that reaches them), and it is the largest graph.
        heads = []
        for t in roots:
            gf = grad_fn(t)
            if gf is None:
                continue
            try:
                seq = gf._sequence_nr()
            except Exception:
                seq = -1
            heads.append((seq, len(heads), gf, t))
        heads.sort(reverse=True, key=_first)
        newest = heads[0][3] if heads else None  # the root made last: a chain's head
        visited = set()
        order = []  # the nodes as found, each root's after the one before
        starts = []  # (where a root's nodes start in order, the root)
        per_root = []
        capped = False
        paused_at = 0
        for _, _, gf, t in heads:
            if capped:
                break
            if gf in visited:
                continue
            if len(visited) - paused_at >= STEP_NODES:
                # (Many small graphs: a pause between them, as within a big one.)
                yield
                paused_at = len(visited)
            n0 = len(visited)
            starts.append((len(order), t))
            if (yield from walk_steps(gf, visited, GRAPH_NODE_CAP, order)):
                capped = True
            per_root.append((len(visited) - n0, t, gf))
        del heads
        saved, partial = yield from self._saved_bytes(torch, order, starts, tensor_types,
                                                      tensors)
        del order, starts
        out = {"roots": len(roots), "nodes": len(visited), "saved_bytes": saved}
        if capped:
            out["capped"] = True
        if partial:
            out["saved_partial"] = True
        top = nlargest(3, per_root, key=_first)
        best = [p[1] for p in top]
        fns = {id(p[1]): p[2] for p in top}
        if top and not capped:
            # (Nodes shared with a root walked earlier count for that one.)
            out["largest"] = top[0][0]
        del visited, per_root, top
        if capped:
            heads = best if newest is None or any(t is newest for t in best) else (
                best + [newest])
            history = yield from self._history(heads)
            if history is not None:
                out["history"] = history
        del newest
        return out, best, fns

    def _history(self, heads):
        """How much autograd history the biggest graphs alive at the step
        boundary keep, where their node count hit the walk's cap and cannot
        tell growth any more: the nodes made from the oldest node still
        alive to the newest (sequence numbers), counted only when that
        oldest node was made before the last census's newest one. A correct
        loop keeps at most the current step's graph, made since the last
        census: 0 however big it is and however its size varies. A chain
        (`total += loss`) grows by every step's nodes, one hop per step.
        (A graph built anew each step on top of one made once at set-up
        would look like a chain; below the cap the node count tells them
        apart.) None without sequence numbers."""
        found = None
        newest_seen = None
        for t in heads:
            gf = grad_fn(t)
            if gf is None:
                continue
            r = yield from oldest_steps(gf, HISTORY_HOP_CAP)
            if r is None:
                continue
            lo, hi = r
            newest_seen = hi if newest_seen is None else max(newest_seen, hi)
            last = self.graph_newest
            span = hi - lo if last is None or lo <= last else 0
            found = span if found is None else max(found, span)
        if newest_seen is not None:
            self.graph_newest = newest_seen
        return found

    def _saved_bytes(self, torch, nodes, starts, tensor_types, tensors):
        known = set(map(id, tensors))  # Python objects before this census
        own = self.own_tensors
        saved_ids = self.saved_ids = set()  # what the graphs hold, for suspects
        saved_root = self.saved_root = {}
        next_start = 0
        root = None
        seen = set()
        total = 0
        inspected = 0
        freed_streak = 0
        partial = False
        cache = self.saved_names
        ttypes = tensor_types or {torch.Tensor}
        i = 0
        while i < len(nodes) and not partial:
            if i:
                # (Outside torch's function-mode guard, which must not stay
                # on while the job runs. Saved tensors the job's backward
                # frees meanwhile read as freed: the step's own graph.)
                yield
            end = i + SAVED_STEP
            with _no_torch_function(torch):
                for j, node in enumerate(nodes[i:end], i):
                    while next_start < len(starts) and starts[next_start][0] <= j:
                        root = starts[next_start][1]
                        next_start += 1
                    if inspected >= SAVED_NODE_CAP or freed_streak >= SAVED_FREED_STREAK:
                        partial = True
                        break
                    nt = type(node)
                    attrs = cache.get(nt)
                    if attrs is None:
                        try:
                            attrs = tuple(a for a in dir(node) if a.startswith("_saved_"))
                        except Exception:
                            attrs = ()
                        if len(cache) < 5000:
                            cache[nt] = attrs
                    if not attrs:
                        continue
                    inspected += 1
                    freed = False
                    for a in attrs:
                        try:
                            v = getattr(node, a)
                        except Exception:
                            freed = True
                            break
                        if type(v) in ttypes:
                            vals = (v,)
                        elif type(v) in (list, tuple):
                            vals = v
                        else:
                            continue
                        for x in vals:
                            if type(x) not in ttypes:
                                continue
                            saved_ids.add(id(x))
                            if id(x) not in saved_root:
                                saved_root[id(x)] = root
                            if id(x) not in known and id(x) not in own:
                                fp = _fingerprint(x)
                                if fp is not None:
                                    own[id(x)] = fp
                            try:
                                sk, nb = _storage(x, x.device)
                            except Exception:
                                continue
                            if sk not in seen:
                                seen.add(sk)
                                total += nb
                    freed_streak = freed_streak + 1 if freed else 0
            i = end
        return total, partial

    def _modules(self, torch, mods):
        by_class = {}
        seen = set()
        param_bytes = 0
        get = object.__getattribute__
        with _no_torch_function(torch):
            for m in mods:
                cls = type(m).__qualname__
                by_class[cls] = by_class.get(cls, 0) + 1
                try:
                    params = get(m, "__dict__").get("_parameters")
                except Exception:
                    continue
                if not params:
                    continue
                try:
                    for p in params.values():
                        if p is None:
                            continue
                        sk, nb = _storage(p, p.device)
                        if sk not in seen:
                            seen.add(sk)
                            param_bytes += nb
                except Exception:
                    continue
        top = dict(nlargest(50, by_class.items(), key=_second))
        return ({"count": len(mods), "param_bytes": param_bytes, "by_class": top},
                by_class)

    # -- containers ------------------------------------------------------

    def _containers(self, conts, own, want_ids=False):
        # Containers of some length are followed by id (lengths only); the
        # largest of them are listed.
        lens = list(map(len, conts))
        keep = list(map(MIN_TRACKED_LEN.__le__, lens))
        big = list(compress(conts, keep))
        blens = list(compress(lens, keep))
        del lens, keep
        k = TOP_CONTAINERS + 8
        thr = sorted(blens)[-k] if len(blens) > k else MIN_TRACKED_LEN
        sel = list(map(thr.__le__, blens))
        top = sorted(zip(compress(blens, sel), compress(big, sel)), key=_first, reverse=True)
        del sel
        out = []
        shown = set()
        for n, c in top:
            if id(c) in own or (type(c) is deque and c.maxlen is not None):
                continue  # (a bounded deque is reported in `bounded`)
            out.append({"id": id(c), "type": type(c).__name__, "len": n})
            shown.add(id(c))
            if len(out) >= TOP_CONTAINERS:
                break
        del top
        ids = list(map(id, big))
        cur = dict(zip(ids, blens))
        for i in own:
            cur.pop(i, None)
        # A deque with a maxlen is bounded by construction: it fills, then
        # stays flat; its filling is not a leak. It is reported on its own,
        # with its bound and what an item weighs, from its first rise on:
        # memory that grows while it fills is the buffer filling, and the
        # report takes it out of the fit before calling a leak.
        bounded = []
        bprev = self.bounded_prev
        bnow = {}
        followed = self.bounded_followed
        for c in compress(big, map(_DEQUE_SET.__contains__, map(type, big))):
            if c.maxlen is not None:
                cid = id(c)
                cur.pop(cid, None)
                n = len(c)
                bnow[cid] = n
                if cid not in followed:
                    p = bprev.get(cid)
                    if p is None or n <= p or len(followed) >= MAX_BOUNDED:
                        continue
                    followed[cid] = None
                entry = {"id": cid, "type": "deque", "len": n, "maxlen": c.maxlen,
                         "item_bytes": _item_bytes(c)}
                name = followed[cid]
                if name is not None:
                    entry["holder"] = name
                elif cid not in self.bounded_tried and n * entry["item_bytes"] >= NAME_BOUNDED_BYTES:
                    self.bounded_tried.add(cid)
                    self.bounded_to_name.append(c)
                bounded.append(entry)
        for cid in list(followed):
            if cid not in bnow:
                del followed[cid]  # let go of: its id may be reused
        self.bounded_prev = bnow
        self.bounded = bounded
        prev = self.container_prev
        values = {}
        # Containers that rose since the last census (C-level set difference);
        # the first census is warm-up, as for every series.
        if self.n > self.warm_n + 1:
            for cid, n in cur.items() - prev.items():
                p = prev.get(cid)
                if p is not None and n > p:
                    values["container:%d" % cid] = n
        # Series still rising keep their history; others restart.
        runs = self.growth.runs
        for key in list(runs):
            if key.startswith("container:") and key not in values:
                cid = parse(key).cid
                if cid in cur:
                    values[key] = cur[cid]
        # Growth needs the previous value of each: give Growth what it needs.
        gprev = self.growth.prev
        for key in values:
            cid = parse(key).cid
            p = prev.get(cid)
            if p is not None:
                gprev[key] = p
        self.container_prev = cur
        by_id = None
        if values or want_ids:
            by_id = dict(zip(ids, big))
            for key in values:
                cid = parse(key).cid
                c = by_id.get(cid)
                if c is not None and cid not in shown and len(out) < TOP_CONTAINERS * 2:
                    out.append({"id": cid, "type": type(c).__name__, "len": len(c)})
                    shown.add(cid)
        # A series that starts here was counted from the last census's length
        # (above): the report gets that point too, so that it fits the same
        # series the probe judged, not one census shorter (a container that
        # was not among the largest listed then is a suspect after three
        # rises, and the report would need one more census to fit it).
        if values:
            runs = self.growth.runs
            for entry in out:
                key = "container:%d" % entry["id"]
                if key in values and key not in runs and entry["id"] in prev:
                    entry["prev"] = prev[entry["id"]]
        return out, values, by_id or {}, big

    def _untracked_dicts(self, sel, sel_types, user_types):
        """A dict holding only atomic values (numbers, strings, arrays) is not
        tracked by the collector, so gc.get_objects() never lists it: reach
        such dicts from user objects, the globals of user modules and closure
        cells, two references down."""
        insts = list(compress(sel, map(user_types.__contains__, sel_types)))
        libs = self.libs
        for name, m in list(sys.modules.items()):
            if m is not None and libs.is_user_module(name):
                try:
                    insts.append(object.__getattribute__(m, "__dict__"))
                except Exception:
                    pass
        cells = list(compress(sel, map(_CELL_SET.__contains__, sel_types)))
        out = {}
        # User objects and globals: their dicts, and the dicts in those (an
        # instance's __dict__ before 3.11, a dict of dicts).
        level = insts
        for _ in range(2):
            if not level:
                break
            refs = gc.get_referents(*level)
            dicts = list(compress(refs, map(_DICT_SET.__contains__, map(type, refs))))
            del refs
            out.update(zip(map(id, filterfalse(gc.is_tracked, dicts)),
                           filterfalse(gc.is_tracked, dicts)))
            level = list(filter(gc.is_tracked, dicts))
            del dicts
        # Closure variables.
        if cells:
            refs = gc.get_referents(*cells)
            dicts = list(compress(refs, map(_DICT_SET.__contains__, map(type, refs))))
            del refs
            out.update(zip(map(id, filterfalse(gc.is_tracked, dicts)),
                           filterfalse(gc.is_tracked, dicts)))
            del dicts
        del insts, cells, level
        return list(out.values())

    # -- numpy -----------------------------------------------------------

    def _numpy(self, sel, sel_types, untracked, user_types, nd_types):
        found = {}
        # Tracked ndarray subclasses (with a __dict__) are in the census.
        if len(nd_types) > 1:
            for a in compress(sel, map(nd_types.__contains__, sel_types)):
                found[id(a)] = a
        # Level 0: lists, deques, user objects and the globals of user
        # modules; then what they hold, two levels down.
        level_types = {list, deque}
        level_types.update(user_types)
        level = list(compress(sel, map(level_types.__contains__, sel_types)))
        level.extend(untracked)
        libs = self.libs
        for name, m in list(sys.modules.items()):
            if m is not None and libs.is_user_module(name):
                try:
                    level.append(object.__getattribute__(m, "__dict__"))
                except Exception:
                    pass
        seen = set(map(id, level))
        walk = {tuple, list, dict, deque, OrderedDict, defaultdict}
        walk.update(user_types)
        is_nd = nd_types.__contains__
        for _ in range(3):
            if not level:
                break
            refs = gc.get_referents(*level)
            kinds = list(map(type, refs))
            arrs = list(compress(refs, map(is_nd, kinds)))
            found.update(zip(map(id, arrs), arrs))
            nxt = list(compress(refs, map(walk.__contains__, kinds)))
            level = [o for o in nxt if id(o) not in seen][:NUMPY_LEVEL_CAP]
            seen.update(map(id, level))
            del refs, kinds, arrs, nxt
        total = 0
        owners = set()
        for a in found.values():
            try:
                owner = a
                b = a.base
                while b is not None and type(b) in nd_types:
                    owner = b
                    b = b.base
                if id(owner) not in owners:
                    owners.add(id(owner))
                    total += int(owner.nbytes)
            except Exception:
                continue
        out = {"count": len(found), "bytes": total}
        # A few of the arrays found last (the deepest level: in the user's
        # containers), for the holder search should the count rise.
        sample = list(islice(reversed(list(found.values())), PICKS))
        found.clear()
        return out, sample

    # -- instances for the holder search --------------------------------

    def _instances(self, key, objs, sel, sel_types, type_counts, names, tensor_types,
                   user_types, tensors, tensor_groups, mods, roots, cap):
        """Instances of a series, youngest first (the census's order)."""
        k = parse(key)
        kind, rest = k.kind, k.name
        if kind == "type":
            ts = {t for t in type_counts if names[t] == rest}
            if not ts:
                return []
            if ts & tensor_types:
                # The tensor groups that rise (a leak of losses, not the
                # gradients made again every step).
                match = set()
                for k, g in tensor_groups.items():
                    if k in self.growth.runs:
                        match.update(g["match"])
                out = [t for t, k in zip(tensors, self.tensor_keys)
                       if type(t) in ts and (not match or k in match)]
                return out[:cap]
            if ts <= user_types:
                return list(islice(compress(sel, map(ts.__contains__, sel_types)), cap))
            return list(islice(compress(objs, map(ts.__contains__, map(type, objs))), cap))
        if kind == "tensors":
            g = tensor_groups.get(key)
            if g is None:
                return []
            match = set(g["match"])
            return [t for t, k in zip(tensors, self.tensor_keys) if k in match][:cap]
        if kind == "modules":
            return [m for m in mods if type(m).__qualname__ == rest][:cap]
        if kind in GRAPH_KEYS:
            return roots[:cap]
        return []

    def _survivors_first(self, key, cands):
        """Instances born between the two last censuses and still alive come
        first: a leak's increments; the step's temporaries are gone, and the
        program's long-lived objects were there before. A leak that adds a
        few objects now and then (a model's copy each generation) may add
        none between two censuses: then those born since the series was
        first remembered, and not among them the program's own (a live
        model's parameters, that an optimizer also holds). Else the
        youngest."""
        before = self.survivors.get(key)
        older = self.survivors_old.get(key)
        first = self.survivors_first.get(key)
        n = PICKS * CANDIDATE_FACTOR
        if before:
            born = [o for o in cands if id(o) in before and (older is None or id(o) not in older)]
            if born:
                return _spread(born, n)
            if first is not None and first is not before:
                born = [o for o in cands if id(o) in before and id(o) not in first]
                if born:
                    return _spread(born, n)
        return cands[:n]

    def _picks(self, key, objs, sel, sel_types, type_counts, names, tensor_types,
               user_types, tensors, tensor_groups, graph_best, graph_fns, mods, cont_objs,
               arrays, roots):
        """The instances to trace for one key. A graph's come with the first
        node the largest had when the census walked them (``walked_fns``, by
        id; the instances may be cut or reordered after): a head the job
        updated in place since (`total += loss`) has moved on from it."""
        k = parse(key)
        kind, rest = k.kind, k.name
        if kind in ("type", "tensors", "modules"):
            cands = self._instances(key, objs, sel, sel_types, type_counts, names,
                                    tensor_types, user_types, tensors, tensor_groups, mods,
                                    roots, SURVIVOR_CAP)
            if not cands:
                return None
            return {"key": key, "objects": self._survivors_first(key, cands),
                    "kind": "instances"}
        if kind == "graph.largest":
            # The biggest graph that something in Python holds (the biggest
            # may be an intermediate of the chain), whatever holds the rest.
            return {"key": key, "objects": list(graph_best), "kind": "instances", "picks": 1,
                    "walked_fns": graph_fns}
        if kind in GRAPH_KEYS:
            # The biggest graphs, and the youngest tensors with a graph: the
            # biggest may be intermediates that only the graph holds (torch
            # keeps their Python objects), which name no holder.
            objs_ = list(graph_best)
            ids = set(map(id, objs_))
            for t in self._survivors_first(key, roots[:SURVIVOR_CAP]):
                if id(t) not in ids:
                    objs_.append(t)
            return {"key": key, "objects": objs_, "kind": "instances", "best": len(graph_best),
                    "walked_fns": graph_fns}
        if kind == "container":
            c = cont_objs.get(int(rest))
            if c is None:
                return None
            return {"key": key, "objects": [c], "kind": "container"}
        if kind == "figures":
            return {"key": key, "objects": [], "kind": "figures"}
        if kind == "numpy":
            return {"key": key, "objects": list(arrays), "kind": "numpy"}
        return None


def _rate(run):
    """Mean rise per census of a series' run of values (0 without one)."""
    if not run or len(run) < 2:
        return 0.0
    return (run[-1] - run[0]) / float(len(run) - 1)


def _spread(items, n):
    """``n`` items spread evenly over ``items`` (in order)."""
    if len(items) <= n:
        return list(items)
    step = len(items) / float(n)
    return [items[int(i * step)] for i in range(n)]


def _prefer_held(suspects, ours):
    """Among each suspect's candidates, those that something in Python holds
    come first (one heap pass for all): the others are held from C (a
    tensor kept only by an autograd graph) or by a running frame only, and
    name no holder, or a worse one. A generator that pauses between pieces
    of its referrers."""
    cands = []
    for s in suspects:
        if s[3]["kind"] == "instances":
            cands.extend(s[3]["objects"])
    if not cands:
        return
    ids = set(map(id, cands))
    skip = set(map(id, ours))
    skip.add(id(cands))
    for s in suspects:
        skip.add(id(s[3]["objects"]))
    # (The probe's snapshot of the running frames' locals: a frame's
    # variable is no holder here, nor the copy of it.)
    skip.update(_steps.kept)
    held = set()
    frame = type(sys._getframe())
    del cands
    # (What was listed when the census started: the picks are from there.)
    refs = yield from _steps.referrers(ours[0], ids, skip)
    r = None
    for i, r in enumerate(refs):
        if i % PREFER_STEP == PREFER_STEP - 1:
            yield  # (a referrer may be a container of a million items)
        if type(r) is frame or is_ours(r):
            continue
        try:
            held.update(ids.intersection(map(id, gc.get_referents(r))))
        except Exception:
            continue
    del refs, r
    for s in suspects:
        info = s[3]
        if info["kind"] != "instances":
            continue
        objs = info["objects"]
        first = [o for o in objs if id(o) in held]
        rest = [o for o in objs if id(o) not in held]
        picks = info.get("picks", PICKS)
        info["objects"] = first[:picks] if first else rest[:picks]
        # (None held in Python now: a search that finds no holder later is
        # no sign that the job let them go meanwhile.)
        info["held"] = bool(first)


def _rank(key, user_names, tensor_names):
    """0: what names a leak by itself (containers, graphs, figures, modules,
    tensor groups, user classes); 1: tensor types; 2: other types, and numpy
    arrays (usually in a container that rises too; arrays in tuples cannot be
    traced back: the collector stops tracking tuples of untracked items)."""
    if key == "numpy":
        return 2
    k = parse(key)
    if k.kind != "type":
        return 0
    name = k.name
    if name in user_names:
        return 0
    if name in tensor_names:
        return 1
    return 2


_CellType = type((lambda x: lambda: x)(0).__closure__[0])
# Predicates for map(): a set's __contains__ runs in C, a function would not.
_CELL_SET = frozenset((_CellType,))
_DICT_SET = frozenset((dict,))
_DEQUE_SET = frozenset((deque,))


def _item_bytes(d):
    """What an item of deque ``d`` weighs, bytes: the mean over its newest
    few, each with what it holds two levels down (a transition's tuple and
    its arrays). A view counts the bytes it shows, not its whole base: a
    batch split into per-item views costs its items' share."""
    n = min(len(d), BOUNDED_SAMPLE)
    if n == 0:
        return 0
    total = 0
    for i in range(1, n + 1):
        try:
            total += _deep_bytes(d[-i], 2)
        except Exception:
            pass
    return int(total / n)


def _deep_bytes(o, depth):
    t = type(o)
    size = sys.getsizeof(o, 0)
    if t.__module__ == "numpy" and t.__name__ == "ndarray":
        if getattr(o, "base", None) is not None:
            size += int(o.nbytes)  # a view: getsizeof leaves its data out
        return size
    if t.__module__.startswith("torch") and hasattr(o, "untyped_storage"):
        return size + int(o.element_size()) * int(o.numel())
    if depth <= 0:
        return size
    if isinstance(o, (tuple, list)):
        for x in o[:BOUNDED_SAMPLE]:
            size += _deep_bytes(x, depth - 1)
    elif isinstance(o, dict):
        for k, v in list(o.items())[:BOUNDED_SAMPLE]:
            size += _deep_bytes(v, depth - 1)
    else:
        d = getattr(o, "__dict__", None)
        if type(d) is dict:
            size += _deep_bytes(d, depth - 1)
    return size


def _first(p):
    return p[0]


def _second(p):
    return p[1]


def _fingerprint(t):
    try:
        return (t.data_ptr(), t.storage_offset(), tuple(t.shape), t.dtype)
    except Exception:
        return None


def _storage(t, dev):
    """(dedup key, bytes) of a tensor's storage. Only views ask for the
    storage object (torch keeps such Python objects alive as long as the
    storage): a tensor that is not a view spans its storage."""
    try:
        es = t.element_size()
        off = t.storage_offset() * es
        if t._is_view():
            st = t.untyped_storage()
            base = st.data_ptr()
            nb = st.nbytes()
        else:
            base = t.data_ptr() - off if t.numel() else 0
            nb = t.nbytes + off
        if base:
            return (base, dev), nb
        return id(t), nb
    except Exception:
        try:
            return id(t), t.numel() * t.element_size()
        except Exception:
            return id(t), 0


class _Null(object):
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


_NULL = _Null()


def _no_torch_function(torch):
    """Tensor subclasses and torch-function modes must not see the census."""
    try:
        c = torch._C
        cls = getattr(c, "DisableTorchFunction", None) or getattr(
            c, "DisableTorchFunctionSubclass", None)
        if cls is not None:
            return cls()
    except Exception:
        pass
    return _NULL


def _figures():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return None
    try:
        return len(plt.get_fignums())
    except Exception:
        return None


def _cuda(torch):
    if torch is None:
        return None
    try:
        cuda = torch.cuda
        if not cuda.is_initialized():
            return None
        return {"allocated": int(cuda.memory_allocated()), "reserved": int(cuda.memory_reserved())}
    except Exception:
        return None
