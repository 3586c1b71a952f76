"""Who holds a growing object: a breadth-first walk up ``gc.get_referrers``
to the first named root (an instance attribute, a module global, a class
attribute, a closure variable, a frame local), and where an object was made
(``tracemalloc``).

One ``gc.get_referrers`` call per level serves every object searched at
once, so a search costs at most ``MAX_PASSES`` passes over the heap.
"""

import gc
import linecache
import re
import sys
import types
from collections import deque

from ._steps import is_ours, referrers, run

MAX_DEPTH = 8  # references from the object to its root (an object's __dict__ is no step)
MAX_PASSES = 12  # heap passes
MAX_FRONTIER = 60  # per source and level
MAX_VISITED = 400  # per source

_PY313 = sys.version_info >= (3, 13)
_CO_OPTIMIZED = 0x0001
_HEAPTYPE = 1 << 9

_FrameType = types.FrameType
_FunctionType = types.FunctionType
_CellType = getattr(types, "CellType", type((lambda x: lambda: x)(0).__closure__[0]))
_ModuleType = types.ModuleType
_GEN_TYPES = (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)
_MemberDescriptor = types.MemberDescriptorType
_CONTAINERS = (list, tuple, dict, set, frozenset)

# Fallback roots, for when no root of the user's is found, best first: a
# library's named root (a global), then a part of a model passed on the way.
_LIB_ROOT = 1
_LIB_PART = 2
# A frame local reached only past a library object's attribute (the local
# `trainer` above `Trainer.log_history`) names less than that attribute.
_LIB_LOCAL = 3

# Where nn.Module keeps its submodules, parameters and buffers.
_MODULE_REGISTRIES = frozenset(("_modules", "_parameters", "_buffers"))
_MODEL_BASES = frozenset((("torch.nn.modules.module", "Module"),
                          ("torch.optim.optimizer", "Optimizer")))

# Roots, best first when one level gives several.
_PRIORITY = {"attribute": 0, "global": 0, "class_attribute": 0, "closure": 0, "local": 1}


class _FrameAt(object):
    """Where a frame was (its code and line), without the frame."""

    __slots__ = ("f_code", "f_lineno")

    def __init__(self, code, line):
        self.f_code = code
        self.f_lineno = line


def snapshot_locals(libs):
    """The locals of the running user frames of this thread, now, as
    ``Searcher(frame_locals=...)`` takes them, and the values themselves:
    the caller keeps them alive until its search (an id is only a name
    while its object lives)."""
    s = Searcher.__new__(Searcher)
    s.libs = libs
    s.current_frames = set()
    s.running_frames = set()
    s.locals = {}
    s.local_values = []
    try:
        s._scan_frames()
        return s.frame_locals(), s.local_values
    finally:
        s.locals = {}
        s.local_values = None


def _tname(o):
    try:
        n = type(o).__name__
        return n if isinstance(n, str) else "?"
    except Exception:
        return "?"


def _key_of(d, value):
    """The key of ``d`` whose value is ``value`` (identity), or None."""
    try:
        for k, v in list(d.items()):
            if v is value:
                return k
    except Exception:
        pass
    return None


def _code_name(code):
    n = getattr(code, "co_qualname", None) or code.co_name
    return n if isinstance(n, str) else "?"


class Searcher(object):
    """One holder search (every key of one census), then dropped."""

    def __init__(self, libs, through=(), containers=(), frame_locals=None):
        self.libs = libs
        self.through = set(through)
        self.containers = set(containers)  # ids of the containers the census follows
        self.model_types = {}  # type -> whether it is a torch module or optimizer
        self.keep = []  # our own lists, alive (and ignored) until the end
        self.ignore = set()
        self.start_ids = set()
        self.module_dicts = {}
        for name, m in list(sys.modules.items()):
            if m is None:
                continue
            try:
                d = object.__getattribute__(m, "__dict__")
            except Exception:
                continue
            if type(d) is dict:
                own = d.get("__name__")  # __main__ also shows as __mp_main__
                self.module_dicts[id(d)] = own if isinstance(own, str) else name
        self.ignore.add(id(self.keep))
        self.ignore.add(id(self.model_types))
        # The probe's snapshots of the locals hold the job's objects for it.
        from . import _steps

        self.ignore.update(_steps.kept)
        self.current_frames = set()
        self.running_frames = set()
        self.locals = {}
        self.picked = []  # per group: the object that reached its holder
        self.local_values = None  # kept by snapshot_locals only
        self._scan_frames()
        if frame_locals:
            # The locals as they were when the census started (it ran in
            # slices: the loop has rebound its variables since).
            self.locals.update(frame_locals)

    def _mine(self, o):
        self.keep.append(o)
        self.ignore.add(id(o))
        return o

    # -- frames ----------------------------------------------------------

    def _scan_frames(self):
        """Locals of running user frames, by the id of their value: frames of
        running functions are not found by gc.get_referrers (3.11+).

        No frame may stay referenced from here once done: a frame object
        keeps its function's locals when the function returns, and the
        collector is paused while the probe works."""
        me = f = top = value = items = None
        stacks = others = []
        try:
            me = sys._getframe()
            f = me
            while f is not None:
                self.current_frames.add(id(f))
                f = f.f_back
            try:
                others = list(sys._current_frames().values())
            except Exception:
                others = []
            for top in others:
                f = top
                while f is not None:
                    self.running_frames.add(id(f))
                    f = f.f_back
            self.running_frames.update(self.current_frames)
            stacks = [me.f_back]
            if _PY313:
                # Reading another thread's frame is safe only without snapshots.
                stacks.extend(others)
            seen = set()
            for top in stacks:
                f = top
                depth = 0
                while f is not None and depth < 200:
                    depth += 1
                    if id(f) in seen:
                        break
                    seen.add(id(f))
                    code = f.f_code
                    if is_ours(f) or not self.libs.is_user_file(code.co_filename):
                        f = f.f_back
                        continue
                    items = self._frame_items(f)
                    for name, value in items:
                        if id(value) not in self.locals:
                            self.locals[id(value)] = (f, name)
                            if self.local_values is not None:
                                self.local_values.append(value)
                    items = value = None
                    f = f.f_back
        finally:
            me = f = top = value = items = None
            stacks = others = None

    def frame_locals(self):
        """The locals of running user frames as found now, without their
        frames: ``{id(value): (where, name)}``, for a search made later, while
        the values are kept alive by the caller."""
        return dict((vid, (_FrameAt(f.f_code, f.f_lineno), name))
                    for vid, (f, name) in self.locals.items())

    def _frame_items(self, f):
        """A frame's locals without keeping them: before 3.13 reading
        ``f_locals`` of a function leaves a snapshot dict on the frame (which
        would keep the values alive); it is emptied again when nobody else
        holds it."""
        code = f.f_code
        try:
            if not (code.co_flags & _CO_OPTIMIZED):
                loc = f.f_locals
                if loc is f.f_globals:
                    return []
                return list(loc.items())
            if _PY313:
                return list(f.f_locals.items())
            if id(f) not in self.current_frames and id(f) in self.running_frames:
                return []  # another thread's running frame: not ours to touch
            d = f.f_locals
            items = list(d.items())
            if type(d) is dict and sys.getrefcount(d) <= 3:
                d.clear()
            del d
            return items
        except Exception:
            return []

    def _frame_var(self, f, value):
        for name, v in self._frame_items(f):
            if v is value:
                return name
        return None

    # -- the walk ----------------------------------------------------------

    def search(self, groups):
        """groups: list of lists of objects (the instances of one key). Returns
        one holder dict per group (None where nothing was found)."""
        return run(self.search_steps(groups))

    def search_steps(self, groups, sliced=False):
        """``search`` as a generator that pauses (yields) after each pass
        over the heap, so that the job can run a step between two. What the
        job lets go of meanwhile has no referrer left: a walk from it names
        nothing, never a holder it no longer has. ``sliced``: the job runs
        between the pieces; each pass then lists the heap afresh and looks
        into it a chunk at a time (``_steps.referrers``), which takes longer
        in all than one ``gc.get_referrers`` but never long at once."""
        nodes = self._mine([])
        childs = self._mine([])
        srcs = []
        chains = []
        bounded = []
        ldepth = []
        libpath = []  # per node: the walk passed a library object's attribute
        results = []  # per source: list of candidate roots at the first level found
        fallback = []  # per source: library attributes passed on the way up
        done = []
        visited = []
        for g, objs in enumerate(groups):
            for o in objs:
                s = len(results)
                results.append([])
                fallback.append([])
                done.append(False)
                visited.append({id(o)})
                nodes.append(o)
                childs.append(None)
                srcs.append((g, s))
                chains.append([_tname(o)])
                bounded.append(False)
                ldepth.append(0)
                libpath.append(False)
        self._mine(list(groups))
        # What the walks start from (a module's buffer that is one of them
        # is named by its key).
        self.start_ids = {id(o) for objs in groups for o in objs}
        self.ignore.add(id(groups))
        for g_objs in groups:
            self.ignore.add(id(g_objs))  # the caller's: alive until it is done
        depth = 0
        while nodes and depth <= MAX_PASSES:
            # Locals of running frames: the node itself is a local.
            for i, n in enumerate(nodes):
                s = srcs[i][1]
                hit = self.locals.get(id(n))
                if hit is not None and not done[s]:
                    root = self._local(hit[0], hit[1], chains[i] + ["frame"])
                    root["_value"] = n
                    _container_id(root)
                    self.ignore.add(id(root))  # it refers to what the walk visits
                    root["_bounded"] = bounded[i]
                    if libpath[i]:
                        fallback[s].append((_LIB_LOCAL, len(fallback[s]), root))
                    else:
                        results[s].append(root)
            for s, r in enumerate(results):
                # A frame local is a root to fall back on, not where to
                # stop: the newest of many kept objects is also the loop's
                # variable, and what keeps them all is further up.
                if any(h["kind"] != "local" for h in r):
                    done[s] = True
            if all(done) or depth == MAX_PASSES:
                break
            depth += 1
            if depth > 1:
                yield
            if sliced:
                pool = gc.get_objects()
                self.ignore.add(id(pool))
                refs = self._mine((yield from referrers(pool, set(map(id, nodes)),
                                                        self.ignore)))
                self.ignore.discard(id(pool))
                pool = None
            else:
                refs = self._mine(gc.get_referrers(*nodes))
            by_id = {}
            for i, n in enumerate(nodes):
                if not done[srcs[i][1]]:
                    by_id.setdefault(id(n), []).append(i)
            self._mine(by_id)
            new_nodes = self._mine([])
            new_childs = self._mine([])
            new_srcs = []
            new_chains = []
            new_bounded = []
            new_ldepth = []
            new_libpath = []
            per_source = {}
            for r in refs:
                if id(r) in self.ignore:
                    continue
                if is_ours(r):
                    continue
                try:
                    kids = gc.get_referents(r)
                except Exception:
                    continue
                hits = set(map(id, kids)) & by_id.keys()
                del kids
                if not hits:
                    continue
                for nid in hits:
                    for i in by_id[nid]:
                        s = srcs[i][1]
                        if done[s] or id(r) in visited[s] or len(visited[s]) >= MAX_VISITED:
                            continue
                        visited[s].add(id(r))
                        root, cont = self._classify(r, nodes[i], childs[i], chains[i])
                        passed_lib = libpath[i]
                        if root is not None:
                            _container_id(root)
                            if libpath[i] and "container_id" not in root:
                                # (A user's object holding a library's: the
                                # container below is the one the library's
                                # attribute holds, `Queue.queue`.)
                                for _, _, fb in fallback[s]:
                                    if fb.get("container_id"):
                                        root["container_id"] = fb["container_id"]
                                        root.setdefault("container", fb.get("container"))
                                        break
                            self.ignore.add(id(root))
                            root["_bounded"] = bounded[i]
                            # A root the walk goes on past (a library's
                            # attribute or global) is kept in case nothing
                            # better is found above it.
                            lib = root.pop("_lib", 0)
                            if lib == _LIB_ROOT and root["kind"] == "attribute":
                                passed_lib = True
                            if not lib and root["kind"] == "local" and libpath[i]:
                                lib = _LIB_LOCAL
                            if lib:
                                fallback[s].append((lib, len(fallback[s]), root))
                            else:
                                results[s].append(root)
                        if cont and per_source.get(s, 0) < MAX_FRONTIER:
                            node = nodes[i]
                            owner = type(node) is dict and _owns_dict(r, node)
                            ld = ldepth[i] + (0 if owner else 1)
                            if ld > MAX_DEPTH:
                                continue
                            per_source[s] = per_source.get(s, 0) + 1
                            new_nodes.append(r)
                            new_childs.append(node)
                            new_srcs.append(srcs[i])
                            if owner:  # the object, not its __dict__, in the chain
                                new_chains.append(chains[i][:-1] + [_tname(r)])
                            else:
                                new_chains.append(chains[i] + [_tname(r)])
                            new_bounded.append(bounded[i] or _is_bounded(r))
                            new_ldepth.append(ld)
                            new_libpath.append(passed_lib)
            for s, r in enumerate(results):
                if any(h["kind"] != "local" for h in r):
                    done[s] = True
            nodes, childs, srcs, chains = new_nodes, new_childs, new_srcs, new_chains
            bounded, ldepth, libpath = new_bounded, new_ldepth, new_libpath
        # Best root per source, then a vote per group.
        per_group = {}
        s = 0
        for g, objs in enumerate(groups):
            for o in objs:
                cands = results[s]
                if not cands and fallback[s]:
                    cands = [min(fallback[s])[2]]
                    # Named so: a library's own root (a registry, a
                    # cache), reached for want of one of the user's.
                    cands[0]["library"] = True
                if cands:
                    cands.sort(key=lambda h: _PRIORITY.get(h["kind"], 2))
                    per_group.setdefault(g, []).append((cands[0], o))
                s += 1
        out = []
        # The object of each group whose walk reached the root voted for:
        # the one to describe (not one that reached something else).
        self.picked = []
        for g in range(len(groups)):
            pairs = per_group.get(g, [])
            h = _vote([p[0] for p in pairs])
            out.append(h)
            self.picked.append(next((o for r, o in pairs if r is h or (
                h is not None and (r["kind"], r["path"]) == (h["kind"], h["path"]))), None))
        del per_group
        yield
        self._reach(groups, out)
        yield
        for g, h in enumerate(out):
            sub = _subscript(h.get("_value"), self.picked[g]) if h is not None else None
            if sub is not None:
                # Two lists under one dict (`history["train"]`, `history["val"]`)
                # are told apart by their key.
                out[g] = h = dict(h)
                h["key"] = sub
        for h in out:
            if h is not None and h.get("_value") is not None and not h.get("library"):
                h["reaches"] = reaches(h["_value"], self.through, self.containers)
                yield
        for h in out:
            if h is not None:
                value = h.pop("_value", None)
                if h.get("container_id") is not None and value is not None:
                    # (The creation-site lookup finds the container again by
                    # its id among those at least about this long.)
                    try:
                        h["_len"] = len(value)
                    except Exception:
                        pass
                del value
        self.close()
        return out

    def _reach(self, groups, out):
        """Groups no walk up named a root for (their objects are held from C,
        or from deeper than the walk goes) but that a named holder reaches
        going down its container (the list's tuples, their tensors): held by
        that holder. Attribution follows references, or names nothing."""
        named = []
        for h in out:
            if (h is not None and not h.get("library") and h.get("_value") is not None
                    and all(h is not n for n in named)):
                named.append(h)
        if not named:
            return
        for g, objs in enumerate(groups):
            if out[g] is not None or not objs:
                continue
            want = set(map(id, objs))
            for h in named:
                found = self._down(h["_value"], want)
                if found is not None:
                    held = dict(h)
                    held.pop("_value", None)
                    held["chain"] = [_tname(found)] + ["..."] + list(h.get("chain") or [])[-2:]
                    out[g] = held
                    self.picked[g] = found
                    break
            del want

    def _down(self, start, want, depth=4, cap=200000):
        """The first object of ``want`` (ids) reached from ``start`` within
        ``depth`` references down, or None."""
        level = [start]
        seen = {id(start)}
        skip = (type, _ModuleType, _FunctionType, _FrameType)
        try:
            for _ in range(depth):
                refs = gc.get_referents(*level)
                for o in refs:
                    if id(o) in want:
                        return o
                nxt = []
                for o in refs:
                    if id(o) not in seen and gc.is_tracked(o) and not isinstance(o, skip):
                        seen.add(id(o))
                        nxt.append(o)
                del refs
                level = nxt[:cap]
                if not level or len(seen) > cap:
                    return None
        finally:
            level = None
        return None

    def close(self):
        # Empty what we kept (no reference cycle may outlive the search: the
        # collector is paused while it runs).
        for o in self.keep:
            try:
                o.clear()
            except Exception:
                pass
        self.keep = []
        self.ignore = set()
        self.locals = {}
        self.model_types = {}

    def _classify(self, r, node, child, chain):
        """(root, continue): ``r`` refers to ``node``; ``child`` is what ``node``
        refers to on the way (None at the start)."""
        tr = type(r)
        if tr is dict:
            mod = self.module_dicts.get(id(r))
            if mod is not None:
                name = _key_of(r, node)
                if name is None or not isinstance(name, str) or (
                        name.startswith("__") and name.endswith("__")):
                    # (`__loader__`, `__builtins__`: the import system's.)
                    return None, False
                if mod == "__main__":
                    from . import _ipython

                    if _ipython.session_record(name):
                        # (IPython's input history `_ih`, `In`, `_i3`:
                        # strings kept per cell, never what a job keeps.)
                        return None, False
                root = self._global(mod, name, chain + ["module"])
                root["_value"] = node
                # A library's global is a fallback, and the walk stops there
                # (past a module lies every module that imports it).
                root["_lib"] = _LIB_ROOT if not self.libs.is_user_module(mod) else 0
                return root, False
            return None, True
        if tr is _FrameType:
            code = r.f_code
            if not (code.co_flags & _CO_OPTIMIZED) or not self.libs.is_user_file(code.co_filename):
                # Module level and class bodies: their names are found through
                # the module's dict; library frames name nothing useful.
                return None, False
            var = self._frame_var(r, node)
            ch = chain
            value = node
            if var is None and type(node) is dict and child is not None:
                var = self._frame_var(r, child)  # node is the f_locals snapshot
                ch = chain[:-1]
                value = child
            root = self._local(r, var or "?", ch + ["frame"])
            root["_value"] = value
            return root, False
        if tr in _GEN_TYPES:
            frame = getattr(r, "gi_frame", None) or getattr(r, "cr_frame", None) or getattr(
                r, "ag_frame", None)
            if frame is None or not self.libs.is_user_file(frame.f_code.co_filename):
                return None, False
            running = getattr(r, "gi_running", False) or getattr(r, "cr_running", False)
            var = None if running else self._frame_var(frame, node)
            return self._local(frame, var or "?", chain + ["frame"]), False
        if tr is _CellType:
            return None, True
        if tr is _FunctionType:
            # A library's function (a closure of leakspy's pytest plugin)
            # is a fallback, as a library's global is.
            try:
                lib = not self.libs.is_user_file(r.__code__.co_filename)
            except Exception:
                lib = False
            root = self._function_root(r, node, child, chain)
            if root is not None:
                root["_lib"] = _LIB_ROOT if lib else 0
            return root, False
        if tr is _ModuleType or issubclass(tr, type):
            if issubclass(tr, type) and type(node) is dict and child is not None:
                name = _key_of(node, child)
                if name is not None and isinstance(name, str):
                    root = self._class_attr(r, name, chain[:-1] + [_short(r)])
                    root["_value"] = child
                    root["_lib"] = _LIB_ROOT if not self.libs.is_user_type(r) else 0
                    return root, False
            return None, False
        if tr in _CONTAINERS or tr.__name__ in ("deque", "OrderedDict", "defaultdict"):
            return None, True
        if tr in self.through and type(node) is not tr:
            # One of many records (a rising type) holding the object: go on
            # to what holds the records. (A record holding another of its
            # kind, a linked history, is named by that attribute.)
            return None, True
        # Any other object: is ``node`` one of its attributes?
        name = self._attr_name(r, node, child)
        if name is not None and name[0] == "_buffers" and self.libs.is_user_type(tr):
            # A buffer of the user's own module (`self.running_norm = 0.99 *
            # self.running_norm + ...` rebinding a registered buffer) is
            # the user's attribute, by the name the class gives it: the
            # entry that is the object searched from (reached through the
            # instance's __dict__, the registry is the child).
            reg, ch = (child, chain[:-2]) if name[1] else (node, chain[:-1])
            key = None
            if type(reg) is dict:
                key = next((k for k, v in list(reg.items()) if id(v) in self.start_ids), None)
            if isinstance(key, str):
                root = self._attribute(r, key, ch + [_tname(r)])
                root["_value"] = reg[key]
                root["_lib"] = 0
                return root, False
        if name is not None:
            ch = chain[:-1] + [_tname(r)] if name[1] else chain + [_tname(r)]  # via __dict__?
            # nn.Module's own registries (`Actor._modules`) and the insides
            # of torch's modules and optimizers (a Linear's weights, Adam's
            # state) name torch's bookkeeping, not what the user keeps: the
            # walk goes on to what holds the model, with this as a fallback.
            internal = name[0] in _MODULE_REGISTRIES or (
                not self.libs.is_user_type(tr) and self._model_part(tr))
            root = self._attribute(r, name[0], ch)
            root["_value"] = child if name[1] else node
            root["_lib"] = _LIB_PART if internal else 0
            if not internal and not self.libs.is_user_type(tr):
                # An object of the standard library's or of an installed
                # package's (a Queue's deque, a trainer's log history, a
                # logger's handlers): a fallback, and the walk goes on up to
                # the user's object that holds it (`AsyncValidator.results`).
                root["library"] = True
                root["_lib"] = _LIB_ROOT
                return root, True
            return root, internal
        return None, True

    def _model_part(self, tr):
        """Whether instances of ``tr`` are torch modules or optimizers (by
        the names in the class's MRO: no isinstance, no torch import)."""
        r = self.model_types.get(tr)
        if r is None:
            r = False
            try:
                for c in tr.__mro__:
                    if (c.__module__, c.__name__) in _MODEL_BASES:
                        r = True
                        break
            except Exception:
                pass
            self.model_types[tr] = r
        return r

    def _attr_name(self, r, node, child):
        """(name, via_dict) of the attribute of ``r`` that is ``node``."""
        try:
            d = object.__getattribute__(r, "__dict__")
        except Exception:
            d = None
        if type(d) is dict:
            if d is node and child is not None:
                k = _key_of(d, child)
                if isinstance(k, str):
                    return k, True
            else:
                k = _key_of(d, node)
                if isinstance(k, str):
                    return k, False
        try:
            for cls in type(r).__mro__:
                if not (cls.__flags__ & _HEAPTYPE):
                    continue  # slots of built-in types (a method's __self__...)
                for k, v in list(vars(cls).items()):
                    if type(v) is _MemberDescriptor:
                        try:
                            if v.__get__(r, type(r)) is node:
                                return k, False
                        except Exception:
                            continue
        except Exception:
            pass
        return None

    def _function_root(self, f, node, child, chain):
        try:
            if f.__closure__ is node and child is not None:
                idx = None
                for i, c in enumerate(node):
                    if c is child:
                        idx = i
                        break
                names = f.__code__.co_freevars
                var = names[idx] if idx is not None and idx < len(names) else "?"
                code = f.__code__
                return {"kind": "closure", "path": "%s.<%s>" % (f.__qualname__, var),
                        "container": _container(chain[:-1]),
                        "file": code.co_filename, "line": code.co_firstlineno,
                        "chain": chain[:-2] + ["cell", "function"]}
            if node is f.__defaults__ or node is f.__kwdefaults__:
                code = f.__code__
                return {"kind": "attribute", "path": "%s.__defaults__" % f.__qualname__,
                        "container": _container(chain), "file": code.co_filename,
                        "line": code.co_firstlineno, "chain": chain + ["function"]}
            fd = f.__dict__
            if node is fd and child is not None:
                k = _key_of(fd, child)
                if isinstance(k, str):
                    code = f.__code__
                    return {"kind": "attribute", "path": "%s.%s" % (f.__qualname__, k),
                            "container": _container(chain[:-1]), "file": code.co_filename,
                            "line": code.co_firstlineno, "chain": chain[:-1] + ["function"]}
        except Exception:
            pass
        return None

    # -- roots -----------------------------------------------------------

    def _local(self, frame, var, chain):
        code = frame.f_code
        return {"kind": "local", "path": "%s:%s" % (_code_name(code), var),
                "container": _container(chain), "file": code.co_filename,
                "line": frame.f_lineno, "chain": chain}

    def _global(self, modname, name, chain):
        if modname == "__main__":
            # A notebook's namespace: IPython's output history, or the cell
            # that bound the global.
            from . import _ipython

            root = _ipython.global_root(name, chain)
            if root is not None:
                return root
        m = sys.modules.get(modname)
        f = getattr(m, "__file__", None) if m is not None else None
        line = _assignment_line(f, name, None) if isinstance(f, str) else None
        return {"kind": "global", "path": "%s.%s" % (modname, name),
                "container": _container(chain), "file": f if isinstance(f, str) else None,
                "line": line, "chain": chain}

    def _attribute(self, owner, name, chain):
        cls = type(owner)
        if cls.__module__.startswith(("IPython.", "ipykernel.")):
            # IPython's own references to the last results (the display
            # hook's `_`, the last ExecutionResult) are its output history.
            from . import _ipython

            root = _ipython.attribute_root(owner, name, chain)
            if root is not None:
                return root
        f, line = _class_location(cls, "self." + name)
        return {"kind": "attribute", "path": "%s.%s" % (_qualname(cls), name),
                "container": _container(chain), "file": f, "line": line, "chain": chain}

    def _class_attr(self, cls, name, chain):
        f, line = _class_location(cls, name)
        return {"kind": "class_attribute", "path": "%s.%s" % (_qualname(cls), name),
                "container": _container(chain), "file": f, "line": line, "chain": chain}


_CONTAINER_NAMES = frozenset(("list", "dict", "set", "deque", "OrderedDict", "defaultdict",
                              "Counter"))


# The walk down from a named holder for what else it keeps: this deep (an
# object's __dict__ is a level of its own), and
# this many objects at most (a figure is thousands).
REACH_DEPTH = 16
REACH_CAP = 50000
# Tensors whose series a holder's walk down reads (device, dtype and kind
# of each): a few hundred tell every kind a holder keeps.
REACH_TENSORS = 500


def reaches(start, rising, containers=()):
    """The series of the census that count objects ``start`` keeps, going
    down its references: ``type:<name>`` for each type of ``rising`` (the
    types whose count rose) reached, ``container:<id>`` for each of
    ``containers`` (ids of followed containers) reached, ``numpy`` when
    arrays are, and the ``tensors:`` series of the tensors reached (the
    first REACH_TENSORS of them). What a named holder keeps is its leak,
    whatever series counts it (one leak, one group: a figure's arrays, weak
    references and partials are the figure's)."""
    from ._census import tensor_key_of, type_name

    torch = sys.modules.get("torch")
    tensor_type = getattr(torch, "Tensor", None) if torch is not None else None
    tensors = []

    want = set(rising)
    conts = set(containers)
    reached = set()
    found = set()
    arrays = False
    level = [start]
    seen = {id(start)}
    skip = (type, _ModuleType, _FunctionType, _FrameType)
    try:
        for _ in range(REACH_DEPTH):
            refs = gc.get_referents(*level)
            nxt = []
            for o in refs:
                t = type(o)
                if t in want:
                    found.add(t)
                if id(o) in conts:
                    reached.add(id(o))
                elif not arrays and t.__name__ == "ndarray":
                    arrays = True
                if (tensor_type is not None and len(tensors) < REACH_TENSORS
                        and isinstance(o, tensor_type)):
                    tensors.append(o)
                if id(o) not in seen and gc.is_tracked(o) and not isinstance(o, skip):
                    seen.add(id(o))
                    nxt.append(o)
            del refs
            level = nxt
            if not level or len(seen) > REACH_CAP:
                break
    except Exception:
        pass
    finally:
        level = nxt = None
    keys = ["type:" + type_name(t) for t in found]
    keys.extend("container:%d" % i for i in reached)
    if id(start) in conts:
        keys.append("container:%d" % id(start))
    if arrays:
        keys.append("numpy")
    kinds = set()
    for t in tensors:
        k = tensor_key_of(torch, t)
        if k is not None:
            kinds.add(k)
    tensors = None
    keys.extend(kinds)
    return sorted(keys)


def _container_id(root):
    """The id of the container a root holds, when it holds one (the list in
    `Trainer.losses`): the report joins that container's length series to
    the holder. (The value itself stays under `_value` until the search
    ends: the walk down from a holder starts there.)"""
    value = root.get("_value")
    try:
        if type(value).__name__ in _CONTAINER_NAMES and type(value).__module__ in (
                "builtins", "collections"):
            root["container_id"] = id(value)
    except Exception:
        pass


def _subscript(value, obj):
    """``['train']`` when ``obj`` is an entry of the dict ``value`` (``[3]``
    of the list or tuple), else None."""
    if value is None or obj is None or value is obj:
        return None
    try:
        if type(value) is dict:
            k = _key_of(value, obj)
            if isinstance(k, (str, int)) and not isinstance(k, bool):
                return "[%r]" % (k,)
        elif type(value) in (list, tuple) and len(value) <= 10000:
            for i, v in enumerate(value):
                if v is obj:
                    return "[%d]" % i
    except Exception:
        pass
    return None


def _owns_dict(r, d):
    """Whether ``d`` is the ``__dict__`` of the object ``r``."""
    if type(r) in (dict, list, tuple, set, frozenset):
        return False
    try:
        return object.__getattribute__(r, "__dict__") is d
    except Exception:
        return False


def _is_bounded(o):
    """A deque with a maxlen: what it holds is bounded by construction."""
    try:
        return type(o).__name__ == "deque" and isinstance(o, deque) and o.maxlen is not None
    except Exception:
        return False


def _vote(roots):
    if not roots:
        return None
    tally = {}
    first = {}
    for h in roots:
        # Roots that are one holder under several names (the entries of
        # IPython's output history) vote together.
        k = (h["kind"], h.get("vote", h["path"]))
        tally[k] = tally.get(k, 0) + 1
        first.setdefault(k, h)

    def rank(k):
        h = first[k]
        return (-tally[k], _PRIORITY.get(h["kind"], 2), h["container"] is None)

    order = sorted(tally, key=rank)
    best = first[order[0]]
    best.pop("vote", None)
    # The others the sampled objects reached, by references too: one series
    # (all autograd graphs) is often fed by several leaks, and naming only
    # the winner explains part of it. A frame's variable holding one object
    # (the step's loss) and a library's root are no such holder.
    also = []
    for k in order[1:]:
        h = first[k]
        if len(also) >= MAX_ALSO or (h["kind"] == "local" and not h.get("container")):
            continue
        if h.get("library") or h["path"] == best["path"]:
            continue
        h.pop("vote", None)
        also.append(dict({f: h.get(f) for f in _ALSO_FIELDS if h.get(f) is not None},
                         share=round(tally[k] / len(roots), 3)))
    if also:
        best["share"] = round(tally[order[0]] / len(roots), 3)
        best["also"] = also
    return best


# Runners-up named beside the holder voted for, at most, and what is said of each.
MAX_ALSO = 3
_ALSO_FIELDS = ("kind", "path", "container", "container_id", "key", "file", "line", "chain")


def _container(chain):
    """The container right under the root: chain is [object, ..., root]."""
    if len(chain) >= 3:
        return chain[-2]
    return None


def _short(cls):
    try:
        return cls.__name__
    except Exception:
        return "?"


def _qualname(cls):
    try:
        q = cls.__qualname__
        return q if isinstance(q, str) else _short(cls)
    except Exception:
        return "?"


def _source_lines(filename):
    try:
        return linecache.getlines(filename)
    except Exception:
        return []


# One pattern each, compiled once: a pattern per name would add to `re`'s
# cache as the search runs, objects of the probe's that a census counts.
_CLASS_LINE = re.compile(r"^(\s*)class\s+(\w+)\b")
_ASSIGNMENT = re.compile(r"^(\s*)([A-Za-z_][\w.]*)\s*(:[^=]*)?(=|\+=)(?!=)")


def _class_location(cls, assigned):
    """File of ``cls`` and the line where ``assigned`` (``self.x`` or ``x``) is
    first assigned in its body, else the ``class`` line."""
    try:
        m = sys.modules.get(cls.__module__)
        f = getattr(m, "__file__", None) if m is not None else None
    except Exception:
        f = None
    if not isinstance(f, str):
        return None, None
    lines = _source_lines(f)
    name = _short(cls)
    start = None
    indent = 0
    for i, text in enumerate(lines):
        mt = _CLASS_LINE.match(text)
        if mt and mt.group(2) == name:
            start = i
            indent = len(mt.group(1))
            break
    if start is None:
        return f, None
    line = _assignment_line(f, assigned, (start, indent), lines)
    return f, line if line is not None else start + 1


def _assignment_line(filename, name, block, lines=None):
    """First line assigning ``name`` at module level (block None) or inside
    the class block starting at ``block = (index, indent)``."""
    if lines is None:
        lines = _source_lines(filename)
    if not lines:
        return None
    if block is None:
        rng = range(len(lines))
    else:
        start, indent = block
        end = len(lines)
        for j in range(start + 1, len(lines)):
            t = lines[j]
            if t.strip() and not t.lstrip().startswith("#"):
                ind = len(t) - len(t.lstrip())
                if ind <= indent:
                    end = j
                    break
        rng = range(start + 1, end)
    for i in rng:
        m = _ASSIGNMENT.match(lines[i])
        if m and m.group(2) == name and bool(m.group(1)) == (block is not None):
            return i + 1
    return None


# -- creation sites --------------------------------------------------------

_FUNC_CACHE = {}


def function_at(filename, lineno):
    """Qualified name of the innermost def/class around a line (ast, cached)."""
    spans = _FUNC_CACHE.get(filename)
    if spans is None:
        spans = []
        try:
            import ast

            src = "".join(_source_lines(filename))
            tree = ast.parse(src, filename)

            def visit(node, prefix):
                for child in ast.iter_child_nodes(node):
                    if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        q = prefix + child.name
                        end = getattr(child, "end_lineno", None) or child.lineno
                        spans.append((child.lineno, end, q))
                        sub = q + (".<locals>." if not isinstance(child, ast.ClassDef) else ".")
                        visit(child, sub)
                    else:
                        visit(child, prefix)

            visit(tree, "")
        except Exception:
            spans = []
        if len(_FUNC_CACHE) < 200:
            _FUNC_CACHE[filename] = spans
    best = None
    for start, end, q in spans:
        if start <= lineno <= end and (best is None or start >= best[0]):
            best = (start, q)
    return best[1] if best else "<module>"


_RAW_TB = []


def raw_traceback(tracemalloc, o):
    """Where ``o`` was allocated, as tracemalloc's raw frames ((file, line),
    most recent first), or None. Also for instances with a managed dict on
    3.11, whose memory block starts before the object's GC header plus two
    pointers (3.11's own lookup misses them)."""
    try:
        raw = tracemalloc._get_object_traceback(o)
    except Exception:
        return None
    if raw is not None or sys.version_info[:2] != (3, 11):
        return raw
    try:
        if not (type(o).__flags__ & (1 << 4)):  # Py_TPFLAGS_MANAGED_DICT
            return None
        if not _RAW_TB:
            import ctypes

            f = ctypes.pythonapi._PyTraceMalloc_GetTraceback
            f.restype = ctypes.py_object
            f.argtypes = (ctypes.c_uint, ctypes.c_size_t)
            _RAW_TB.append(f)
        ptr = id(o) - 4 * (8 if sys.maxsize > 2 ** 32 else 4)
        return _RAW_TB[0](0, ptr)
    except Exception:
        return None


def user_site(libs, raw):
    """Innermost user frame of raw tracemalloc frames, as (file, line)."""
    try:
        for filename, lineno in raw:
            if libs.is_user_file(filename):
                return filename, lineno
    except Exception:
        pass
    return None


def vote_site(tracemalloc, libs, cands, nested):
    """The creation site most of ``cands`` were made at, as (file, line), or
    None. With ``nested``, candidates are ``(depth, object)`` pairs (items of
    a container before what they hold) and the shallowest level with any
    traced object decides."""
    from collections import Counter

    votes = {}
    for item in cands:
        depth, o = item if nested else (1, item)
        raw = raw_traceback(tracemalloc, o)
        if raw is None:
            continue
        site = user_site(libs, raw)
        if site is not None:
            votes.setdefault(depth, Counter())[site] += 1
    if not votes:
        return None
    return votes[min(votes)].most_common(1)[0][0]
