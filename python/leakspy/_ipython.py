"""Holders that IPython makes, named the way a notebook user knows them.

In a notebook (an IPython kernel), ``__main__`` is the notebook's namespace
and IPython keeps objects of its own there:

- the output history: the value of every cell that ends with an
  expression is kept in ``Out[N]``, ``_N`` and the last three in ``_``,
  ``__``, ``___``, for the life of the kernel. A cell ending with a loss
  or a model's output keeps that tensor, and the whole autograd graph
  behind it, one more per run of the cell;
- the cells' own globals, which a script would keep as module globals:
  ``losses`` bound in cell ``In[3]``.

The holder search (``_holders``) finds these as globals of ``__main__``
and asks :func:`global_root` what they are; the probe shows a cell's code
as ``Cell In[3]`` (IPython's own traceback label) through
:func:`display_file`. Nothing here imports IPython: outside a running
IPython session every function returns None at the cost of a dict lookup.
"""

import re
import sys

_OUT_NAME = re.compile(r"_(\d+)$")
_LABEL = re.compile(r"Cell In\[\d+\]$")

# How to let go of what the output history keeps.
FREE_OUTPUT = ("IPython keeps each cell's result for the whole session: free them with "
               "`%reset -f out` (or `del Out[N], _N`), and end a cell with `;` so that "
               "its result is not kept")


def shell():
    """The running IPython shell whose namespace is ``__main__``'s, or None."""
    m = sys.modules.get("IPython")
    if m is None:
        return None
    try:
        ip = m.get_ipython()
        main = sys.modules.get("__main__")
        if ip is None or main is None or ip.user_ns is not main.__dict__:
            return None
        return ip
    except Exception:
        return None


def display_file(filename):
    """``Cell In[3]`` for the code of a cell IPython ran (its label in
    IPython's tracebacks), the label itself if given one, else None."""
    if not isinstance(filename, str):
        return None
    if _LABEL.match(filename):
        return filename
    m = sys.modules.get("IPython")
    if m is None:
        return None
    try:
        ip = m.get_ipython()
        named = ip.compile.format_code_name(filename) if ip is not None else None
        if named:
            return "%s %s" % named
    except Exception:
        pass
    return None


def global_root(name, chain):
    """The holder for the global ``name`` of ``__main__`` in an IPython
    session (``chain``: the types from the object up to the module), or None
    outside one. The output history is named with how to free it; any other
    global with the cell that last bound it."""
    ip = shell()
    if ip is None or not isinstance(name, str):
        return None
    try:
        return _root(ip, name, chain)
    except Exception:
        return None


# Attributes of IPython's objects that hold the latest results: the display
# hook's `_`, `__`, `___` and the last cell's ExecutionResult.
_RESULT_ATTRIBUTES = {"DisplayHook": ("_", "__", "___"), "ExecutionResult": ("result",)}


def attribute_root(owner, name, chain):
    """The holder for attribute ``name`` of one of IPython's objects when it
    is a reference to a cell's result (the output history), else None."""
    ip = shell()
    if ip is None:
        return None
    try:
        for cls in type(owner).__mro__:
            if (cls.__module__.startswith("IPython.")
                    and name in _RESULT_ATTRIBUTES.get(cls.__name__, ())):
                hist = ip.user_ns.get("Out")
                return _output(hist if isinstance(hist, dict) else {}, chain)
    except Exception:
        pass
    return None


# IPython's own records of the session: the input history (`In`, `_ih`,
# `_i`, `_i3`...) and the directory history. They grow by a cell, not by a
# step, and keep strings: never the holder of what a job keeps.
_SESSION_NAMES = frozenset(("In", "_ih", "_dh", "_i", "_ii", "_iii", "_exit_code"))
_INPUT_NAME = re.compile(r"_i\d+$")


def session_record(name):
    """Whether the global ``name`` of ``__main__`` is one of IPython's own
    records of the session (never a holder), in a running IPython session."""
    if not isinstance(name, str) or not (name in _SESSION_NAMES or _INPUT_NAME.match(name)):
        return False
    return shell() is not None


def _root(ip, name, chain):
    hist = ip.user_ns.get("Out")
    if not isinstance(hist, dict):
        hist = {}
    m = _OUT_NAME.match(name)
    if m is not None and int(m.group(1)) in hist:
        return _output(hist, chain)
    if name in ("_", "__", "___"):
        if _key_of(hist, ip.user_ns.get(name)) is None:
            return None
        return _output(hist, chain)
    if name in ("Out", "_oh"):
        return _output(hist, chain)
    cell, line = binding_cell(ip, name)
    return {"kind": "global", "path": "__main__.%s" % name, "container": _container(chain),
            "file": "Cell In[%d]" % cell if cell is not None else None,
            "line": line, "chain": chain}


def _output(hist, chain):
    """The output history as a holder, named by its oldest entry of the
    kind of object found (a tensor: the oldest tensor result), so that
    every suspect it holds names the same entry and groups under it."""
    results = [(k, type(v).__name__) for k, v in list(hist.items()) if isinstance(k, int)]
    kind = chain[0] if chain else None
    if kind is not None and not any(t == kind for _, t in results):
        # The object found is the history itself (a dict of tensors): its
        # entries of the kind it keeps most are the ones its growth is made of.
        kinds = [t for _, t in results]
        kind = max(set(kinds), key=kinds.count) if kinds else None
    entries = [k for k, t in results if kind is None or t == kind]
    path = "IPython's output history Out[%d]" % min(entries) if entries else (
        "IPython's output history Out")
    return {"kind": "ipython_output", "path": path, "container": None, "file": None,
            "line": None, "chain": chain[:-1] + ["Out"], "hint": FREE_OUTPUT,
            # One vote for the history, whichever entries hold the objects.
            "vote": "IPython's output history"}


def _key_of(d, value):
    for k, v in list(d.items()):
        if v is value:
            return k
    return None


def _container(chain):
    return chain[-2] if len(chain) >= 3 else None


_CELL_BINDINGS = {}  # cell number -> {name: line} of its top-level bindings


def binding_cell(ip, name):
    """(cell number, line) of the latest cell whose top level binds
    ``name`` (assignment, ``for``, ``with``, ``import``, ``def``, ``class``),
    from IPython's input history; (None, None) when none does."""
    try:
        cells = ip.history_manager.input_hist_raw
    except Exception:
        return None, None
    for n in range(len(cells) - 1, 0, -1):
        names = _CELL_BINDINGS.get(n)
        if names is None:
            names = _bindings(ip, cells[n])
            if len(_CELL_BINDINGS) < 10000:
                _CELL_BINDINGS[n] = names
        line = names.get(name)
        if line is not None:
            return n, line
    return None, None


def _bindings(ip, raw):
    """{name: first line} of the names a cell's top level binds. The body
    of a cell magic that runs Python (``%%time``, ``%%leakspy watch``)
    counts, one line down; the other magics become calls, as IPython runs
    them."""
    import ast

    out = {}
    offset = 0
    try:
        if raw.startswith("%%"):
            head, _, raw = raw.partition("\n")
            offset = 1
        tree = ast.parse(ip.transform_cell(raw))
    except Exception:
        return out

    def add(target, line):
        line += offset
        if isinstance(target, ast.Name):
            out.setdefault(target.id, line)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for t in target.elts:
                add(t, line)
        elif isinstance(target, ast.Starred):
            add(target.value, line)

    def visit(body):
        for node in body:
            line = node.lineno
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    add(t, line)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
                add(node.target, line)
            elif isinstance(node, (ast.For, ast.AsyncFor)):
                add(node.target, line)
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, (ast.With, ast.AsyncWith)):
                for item in node.items:
                    if item.optional_vars is not None:
                        add(item.optional_vars, line)
                visit(node.body)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for a in node.names:
                    out.setdefault((a.asname or a.name).split(".")[0], line + offset)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.setdefault(node.name, line + offset)
            elif isinstance(node, (ast.If, ast.While)):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for h in node.handlers:
                    visit(h.body)
                visit(node.orelse)
                visit(node.finalbody)

    visit(tree.body)
    return out
