"""From growing series to what a person can act on: the objects behind a
series, who holds them (``_holders``), where they were made (tracemalloc),
and one of them described.

Shared by the probe (``_probe``: what grows in a running job, with its own
life cycle, budget and scheduling) and ``assert_no_leak`` (``_assert``:
what grows with the calls of a test). Nothing here keeps a user object
past the call that was given it.
"""

import gc
import os
import sys
from itertools import compress, islice, repeat
from operator import and_, gt, le

from ._autograd import ALL_GRAPHS, GRAPH_KEYS, grad_fn, walk
from ._steps import run

EXAMPLE_NODE_CAP = 100000  # nodes counted in an example's graph
SITE_CANDIDATES = 400  # instances whose allocation tracebacks vote for a site
PYPLOT = "matplotlib.pyplot (figure never closed: plt.close(fig))"


# -- series keys -----------------------------------------------------------------


class Key(object):
    """A census series key, parsed once: ``kind`` is the part before the
    first colon (``type``, ``tensors``, ``modules``, ``container``,
    ``bytes``, ``info``) or the whole key (``graph``, ``graph.history``,
    ``graph.largest``, ``figures``, ``numpy``); ``name`` the rest (a type's
    or module class's name); for tensors ``device``, ``dtype``, ``grad``
    (``grad``, ``leaf``, ``plain``); for a container its ``cid``; for
    ``bytes:<key>`` the ``base`` key."""

    __slots__ = ("text", "kind", "name", "device", "dtype", "grad", "cid", "base")

    def __init__(self, text):
        self.text = text
        kind, sep, rest = text.partition(":")
        self.kind = kind if sep else text
        self.name = rest
        self.device = self.dtype = self.grad = None
        self.cid = None
        self.base = None
        if self.kind == "tensors":
            self.device, self.dtype, self.grad = (rest.split("/") + ["?", "?", "?"])[:3]
        elif self.kind == "container":
            try:
                self.cid = int(rest)
            except ValueError:
                self.cid = None
        elif self.kind == "bytes":
            self.base = parse(rest)

    @property
    def is_graph(self):
        return self.kind in GRAPH_KEYS

    @property
    def all_graphs(self):
        return self.kind in ALL_GRAPHS

    def tensor_group(self):
        """(device, dtype, grad) of a tensors key, for ``tensor_filter``."""
        return [self.device, self.dtype, self.grad]

    def __repr__(self):
        return "Key(%r)" % self.text


def parse(text):
    """The parsed key. (Not cached: a cache would be one more thing the
    census sees grow, and parsing costs less than looking it up.)"""
    return Key(text)


def container_key(cid):
    return "container:%d" % cid


# -- holders ---------------------------------------------------------------------------


def attribute(libs, suspects, through=(), containers=(), frame_locals=None):
    """``attribute_steps`` in one piece."""
    return run(attribute_steps(libs, suspects, through, containers, frame_locals))


def attribute_steps(libs, suspects, through=(), containers=(), frame_locals=None,
                    sliced=False):
    """Who holds each suspect's instances: a list, per suspect, of
    ``(holder or None, bounded, picked)``. ``suspects`` are
    ``(key, per, count, info)`` with ``info["objects"]`` the instances to
    walk up from and ``info["kind"]``; ``through``: types passed on the way
    up (instances of rising types: records, an agent's copies).

    Tensors that only an autograd graph holds (saved for backward; torch
    keeps their Python objects alive with the graph) take the holder of the
    graphs that saved them, found going up from those graphs' roots.
    Open figures are held by pyplot. ``bounded``: the holder is a deque
    with a ``maxlen`` (what it holds fills, then stays flat). ``picked``:
    the instance whose walk reached the holder (the one to describe); the
    caller drops it. A generator that pauses between passes over the heap,
    and within them when ``sliced`` (``_holders.Searcher.search_steps``)."""
    from ._holders import Searcher

    searcher = Searcher(libs, through, containers, frame_locals)
    # Tensors a graph saved have no referrer in Python: the roots of the
    # graphs that saved them do (the loss kept in a list). The walk goes up
    # from those, so the holder named is the one that keeps those graphs,
    # by reference, not the holder of some other graph of the census.
    via_graph = []
    groups = []
    for s in suspects:
        roots = s[3].pop("graph_roots", None) or []
        saved = s[3].pop("graph_saved", None) or []
        via_graph.append(bool(roots))
        # Where some of the instances were saved by graphs, those are the
        # ones that pile up (kept by graphs that are kept): the others are
        # tensors of the same kind that happen to be young (an optimizer's
        # state made afresh), and what holds them is no evidence.
        groups.append(saved + roots if roots else s[3]["objects"])
        roots = saved = None
    try:
        from ._census import GcPaused

        gen = searcher.search_steps(groups, sliced)
        holders = None
        while holders is None:
            with GcPaused():
                try:
                    next(gen)
                except StopIteration as e:
                    holders = e.value
            if holders is None:
                yield
        del gen
        picked = searcher.picked
    finally:
        searcher.picked = None
        searcher.close()
    del groups
    out = []
    for s, h, o, via in zip(suspects, holders, picked, via_graph):
        info = s[3]
        if h is not None and via and o is not None and all(o is not x for x in info["objects"]):
            # Reached from the root of a graph that saved them.
            h = dict(h)
            h["chain"] = [type_of_first(info), "graph"] + list(h.get("chain") or [])
            # A graph's series is told by a graph the holder keeps (that
            # root); a tensor series by one of its own tensors.
            if not parse(s[0]).is_graph:
                o = info["objects"][0] if info["objects"] else None
        if (h is not None and h.get("kind") == "local" and not h.get("container")
                and parse(s[0]).kind in ("type", "tensors")):
            # A frame's variable holding one instance itself (the step's
            # batch, its loss, the root of the graph that saved them) holds
            # one of a series that counts instances, not its growth.
            h = None
        if (h is not None and h.get("kind") == "local" and not h.get("container")
                and s[0] in ALL_GRAPHS and o is not None
                and not (info.get("best") and o is info["objects"][0])):
            # ... and one graph that is not the biggest (the step's loss,
            # though among the few biggest when a chain hit the walk's cap)
            # is one step's graph, not the growth of all graphs (a chain the
            # loss feeds is not reached from it).
            h = None
        bounded = False
        if h is not None:
            h = dict(h)
            bounded = h.pop("_bounded", False)
        if info["kind"] == "figures":
            h = {"kind": "pyplot", "path": PYPLOT, "container": None, "file": None,
                 "line": None, "chain": ["Figure", "pyplot"],
                 "reaches": pyplot_reaches(through, containers)}
        out.append((h, bounded, o))
    del picked
    return out


def pyplot_reaches(through, containers=()):
    """What pyplot's open figures keep, among the rising series (``through``:
    their types; ``containers``: the ids of followed containers)."""
    helpers = sys.modules.get("matplotlib._pylab_helpers")
    figs = getattr(getattr(helpers, "Gcf", None), "figs", None)
    if figs is None:
        return []
    from ._holders import reaches

    # Every figure keeps the same kinds of objects: the newest few, walked
    # to the bottom, tell which series they are (all of them together are
    # more objects than the walk may visit).
    try:
        newest = list(figs.values())[-3:]
    except Exception:
        newest = []
    found = set(reaches(newest, through, containers))
    if id(figs) in set(containers):
        found.add("container:%d" % id(figs))
    del newest
    return sorted(found)


def type_of_first(info):
    objs = info.get("objects") or []
    return type(objs[0]).__name__ if objs else "?"


# -- examples --------------------------------------------------------------------------


def describe(key, obj, count):
    """(what grows, in words; an example) for a suspect of series ``key``
    (a ``Key``), from one of its instances ``obj`` (None when it has none)."""
    example = example_of(obj) if obj is not None and key.kind != "container" else None
    kind = key.kind
    if kind == "type":
        what = key.name
        if example and "dtype" in example:
            what = "%s (%s, %s%s)" % (key.name, example["dtype"], example.get("device", "?"),
                                     ", grad_fn " + example["grad_fn"] if example.get("grad_fn")
                                     else "")
    elif kind == "tensors":
        label = {"grad": "with a grad_fn", "leaf": "requiring grad"}.get(key.grad,
                                                                         "without grad")
        what = "%s %s tensors %s" % (key.device, key.dtype, label)
        if example and example.get("grad_fn"):
            what += " (%s)" % example["grad_fn"]
    elif key.is_graph:
        what = {"graph": "autograd graph nodes", "graph.history": "autograd history",
                "graph.largest": "autograd nodes of the largest graph"}[kind]
        if example and example.get("grad_fn"):
            n = example.get("graph_nodes")
            if isinstance(n, int) and n >= EXAMPLE_NODE_CAP:
                n = "over %d" % EXAMPLE_NODE_CAP
            what += " (root %s, %s nodes)" % (example["grad_fn"], n)
    elif kind == "container":
        item = last_item(obj) if obj is not None else None
        cname = type(obj).__name__ if obj is not None else "container"
        what = "%s (len %d)" % (cname, count)
        if item is not None:
            what = "%s of %s (len %d)" % (cname, type(item).__name__, count)
        example = {"type": type(obj).__name__ if obj is not None else None, "len": count,
                   "item_type": type(item).__name__ if item is not None else None}
    elif kind == "modules":
        what = "%s modules (nn.Module)" % key.name
    elif kind == "figures":
        what = "open matplotlib figures"
    elif kind == "numpy":
        what = "numpy arrays"
    else:
        what = key.text
    return what, example


def example_of(o):
    """One instance described: a tensor's type, shape, dtype, device,
    grad_fn and graph size; an array's shape and dtype; else its type."""
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
                    ex["graph_nodes"] = count_nodes(gf, EXAMPLE_NODE_CAP)
                return ex
        np_ = sys.modules.get("numpy")
        if np_ is not None and isinstance(o, np_.ndarray):
            return {"type": type(o).__name__, "shape": [int(d) for d in o.shape],
                    "dtype": str(o.dtype)}
    except Exception:
        pass
    try:
        return {"type": type(o).__name__}
    except Exception:
        return None


def count_nodes(root, cap):
    seen = set()
    walk(root, seen, cap)
    return len(seen)


def last_item(c):
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


def last_values(c, n):
    """The last ``n`` items (values for a dict) of an exact built-in
    container, newest first."""
    try:
        if isinstance(c, dict):
            return list(islice(reversed(c.values()), n))
        if isinstance(c, (list, tuple)) or type(c).__name__ == "deque":
            k = len(c)
            return [c[i] for i in range(k - 1, max(-1, k - 1 - n), -1)]
    except Exception:
        pass
    return []


class _ContainersById:
    """The containers of a heap by id, for a few wanted ids, while
    tracemalloc runs: it records every allocation with its whole
    traceback, and an id is a new int, so ids for every container of a big
    heap cost seconds. A wanted container is looked for among those at
    least half as long as it was when last seen (a comparison in C
    allocates nothing), longest first; then among the dicts the collector
    does not track; then among all."""

    def __init__(self, census, sel, sel_types, user_types, lens):
        from ._census import _CONTAINER_SET

        self.census, self.sel, self.sel_types = census, sel, sel_types
        self.user_types = user_types
        self.lens = lens
        self.conts = list(compress(sel, map(_CONTAINER_SET.__contains__, sel_types)))
        self.sizes = list(map(len, self.conts))
        self.by_id = {}
        self.done = None  # every container at least this long has an id
        self.untracked = False

    def _down_to(self, floor):
        if self.done is not None and floor >= self.done:
            return
        pick = map(le, repeat(floor), self.sizes)
        if self.done is not None:
            pick = map(and_, pick, map(gt, repeat(self.done), self.sizes))
        conts = list(compress(self.conts, pick))
        self.by_id.update(zip(map(id, conts), conts))
        self.done = floor

    def get(self, cid):
        seen = self.lens.get(cid)
        self._down_to(seen // 2 if seen is not None else 0)
        c = self.by_id.get(cid)
        if c is None and not self.untracked and self.census is not None:
            self.untracked = True
            more = self.census._untracked_dicts(self.sel, self.sel_types, self.user_types)
            self.by_id.update(zip(map(id, more), more))
            c = self.by_id.get(cid)
        if c is None:
            self._down_to(0)
            c = self.by_id.get(cid)
        return c


def newest_items(c, n):
    """(level, object) for the newest elements of a container, then for what
    those hold when they are containers themselves (records, episodes): the
    element itself often comes from a free list, unknown to tracemalloc."""
    out = []
    level = [c]
    for depth in (1, 2, 3):
        nxt = []
        for parent in level:
            for v in last_values(parent, n if depth == 1 else 5):
                out.append((depth, v))
                if type(v) in (list, tuple, dict):
                    nxt.append(v)
        level = nxt[:40]
    return out


def open_figures():
    """The newest open pyplot figures (20 at most)."""
    try:
        helpers = sys.modules.get("matplotlib._pylab_helpers")
        if helpers is None:
            return []
        return [m.canvas.figure for m in list(helpers.Gcf.figs.values())][-20:]
    except Exception:
        return []


# -- tensors ------------------------------------------------------------------------------


def tensor_filter(torch, tensors, group, graph_only, cap):
    """Tensors of one group (``[device, dtype, grad]``, or None for any), or
    only those with a graph, ``cap`` at most."""
    from ._census import _no_torch_function, tensor_key

    want = None
    if group is not None and not graph_only:
        want = "tensors:%s/%s/%s" % tuple((list(group) + ["?", "?", "?"])[:3])
    out = []
    with _no_torch_function(torch):
        for t in tensors:
            try:
                rg = t.requires_grad
                gf = rg and not t.is_leaf
                if graph_only:
                    if not gf:
                        continue
                elif want is not None and tensor_key(t.device, t.dtype, rg, gf) != want:
                    continue
                out.append(t)
                if len(out) >= cap:
                    break
            except Exception:
                continue
    return out


def tensors_like(torch, cands, example, cap):
    """Among tensors of a rising type, those like the suspect's example."""
    ex = example or {}
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


def biggest_graphs(tensors, n):
    """The roots whose walk reaches the most autograd nodes (shared nodes
    counted once, for the first root that reaches them)."""
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


# -- creation sites -------------------------------------------------------------------------


def sites(libs, census, keys, tracemalloc, examples=None, extra=None, containers=None,
          lens=None):
    """key -> (file, line): for each key (text), the most common line of the
    user's code among the allocation tracebacks of its newest instances (a
    few hundred at most; those made while tracemalloc ran have one); for a
    container, of its newest items. ``examples``: key -> example of the
    suspect (a rising type's tensors like it are taken); ``extra``: a
    function key -> candidates or None, for keys of the caller's own;
    ``containers``: key -> id of the container its holder holds, whose
    newest items are the key's own (not the youngest instances of their
    kind anywhere, which may be a step's temporaries); ``lens``: container
    id -> its length when last seen, where the census has no run of it. One
    pass over the heap serves every key."""
    containers = containers or {}
    from ._census import _CONTAINER_SET, _CellType, _mro, type_name
    from ._holders import vote_site

    torch = sys.modules.get("torch")
    objs = gc.get_objects()
    if census is not None and census.frozen:
        objs.extend(census.frozen)
    kinds = list(map(type, objs))
    out = {}
    present = set(kinds)
    tensor_types = set()
    module_types = set()
    if torch is not None:
        for t in present:
            mro = _mro(t)
            if torch.Tensor in mro:
                tensor_types.add(t)
            elif torch.nn.Module in mro:
                module_types.add(t)
    parsed = [parse(k) for k in keys]
    wanted = {}
    for key in parsed:
        if key.kind == "type":
            wanted[key.text] = {t for t in present if type_name(t) == key.name}
        elif key.kind == "tensors" or key.is_graph:
            wanted[key.text] = tensor_types
        elif key.kind == "modules":
            wanted[key.text] = {t for t in module_types
                                if getattr(t, "__qualname__", None) == key.name}
        elif key.kind == "container":
            wanted[key.text] = _CONTAINER_SET
    user_types = set()
    if containers or any(k.kind == "container" for k in parsed):
        wanted["_containers"] = _CONTAINER_SET
        # Dicts of plain values are untracked: reached as in the census.
        user_types = {t for t in present if libs.is_user_type(t)}
        wanted["_untracked_sources"] = user_types | {_CellType}
    union = set()
    for ts in wanted.values():
        union.update(ts)
    sel = list(compress(objs, map(union.__contains__, kinds)))
    del objs, kinds
    sel_types = list(map(type, sel))
    found = None
    for key in parsed:
        cands = extra(key.text) if extra is not None else None
        ts = wanted.get(key.text)
        cid = key.cid if key.kind == "container" else containers.get(key.text)
        if cands is not None:
            pass
        elif cid is not None:
            if found is None:
                # Lengths last seen: the census's, else the holder's.
                seen = dict(lens or {})
                runs = census.growth.runs if census is not None else {}
                for k in parsed:
                    run = runs.get(k.text) if k.kind == "container" else None
                    if run:
                        seen[k.cid] = run[-1]
                found = _ContainersById(census, sel, sel_types, user_types, seen)
            c = found.get(cid)
            cands = newest_items(c, 20) if c is not None else []
            del c
        elif key.kind == "type" and ts:
            cands = compress(sel, map(ts.__contains__, sel_types))
            if ts & tensor_types:
                cands = tensors_like(torch, cands, (examples or {}).get(key.text),
                                     SITE_CANDIDATES)
            else:
                cands = list(islice(cands, SITE_CANDIDATES))
        elif key.kind == "tensors" or key.is_graph:
            all_t = compress(sel, map(tensor_types.__contains__, sel_types))
            cands = tensor_filter(torch, all_t,
                                  key.tensor_group() if key.kind == "tensors" else None,
                                  key.is_graph, SITE_CANDIDATES)
            # A chain's history is the biggest graphs'; all graphs together
            # are the youngest tensors' with a graph, as for their holder.
            if key.kind == "graph.history":
                cands = biggest_graphs(cands, 3)
        elif key.kind == "modules" and ts:
            cands = list(islice(compress(sel, map(ts.__contains__, sel_types)),
                                SITE_CANDIDATES))
        elif key.kind == "figures":
            cands = open_figures()
        else:
            cands = []
        # Items of a container vote before what they hold.
        site = vote_site(tracemalloc, libs, cands, cid is not None)
        del cands
        if site is not None:
            out[key.text] = site
    del sel, sel_types, found
    return out


def file_name(f):
    """A source file as the report names it: a notebook cell's code as
    ``Cell In[3]`` (``_ipython``), else its absolute path."""
    from ._ipython import display_file

    return display_file(f) or os.path.abspath(f)


def thread_of(f, line):
    """The name of the thread, other than the main one and the probe's,
    whose stack is running the code at ``f``:``line`` now (a background
    thread that makes and keeps what grows), or None."""
    th = sys.modules.get("threading")
    if th is None:
        return None
    try:
        main = th.main_thread().ident
        me = th.get_ident()
        active = getattr(th, "_active", {})
        for ident, top in list(sys._current_frames().items()):
            if ident in (main, me):
                continue
            fr = top
            while fr is not None:
                code = fr.f_code
                if code.co_filename == f and _spans(code, line):
                    t = active.get(ident)
                    name = getattr(t, "name", None)
                    return name if isinstance(name, str) else "thread %d" % ident
                fr = fr.f_back
    except Exception:
        pass
    finally:
        top = fr = None
    return None


def _spans(code, line):
    try:
        lines = [n for _, _, n in code.co_lines() if n is not None]
    except AttributeError:  # before 3.10
        return code.co_firstlineno <= line
    return bool(lines) and min(lines) <= line <= max(lines)


def site_of(site):
    """(file, line, function) of a site found by ``sites``."""
    from ._holders import function_at

    f, line = site
    return file_name(f), line, function_at(f, line)
