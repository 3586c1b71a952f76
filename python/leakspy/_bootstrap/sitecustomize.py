"""leakspy's bootstrap, run by Python at start-up as ``sitecustomize``.

``leakspy run`` puts this file first on ``PYTHONPATH`` (as
``<dir>/sitecustomize.py``, next to the ``leakspy`` package). It starts the
in-process probe when ``LEAKSPY_PROBE_SOCKET`` is set, then runs the
``sitecustomize`` it shadows, if any, so the environment's own start-up
customisation still happens. The probe never raises from here; errors of the
shadowed ``sitecustomize`` propagate exactly as they would without leakspy.
"""


def _leakspy_start_probe():
    import os

    if not os.environ.get("LEAKSPY_PROBE_SOCKET"):
        return
    try:
        from leakspy import _probe

        _probe.start()
    except Exception:
        pass


def _leakspy_chain():
    import os
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    skip = {here}
    d = os.environ.get("LEAKSPY_PROBE_DIR")
    if d:
        skip.add(os.path.abspath(d))

    def same(p):
        try:
            a = os.path.abspath(p or os.curdir)
        except Exception:
            return False
        if a in skip:
            return True
        try:
            return any(os.path.samefile(a, s) for s in skip)
        except Exception:
            return False

    try:
        from importlib.machinery import PathFinder
        import importlib.util

        paths = [p for p in sys.path if isinstance(p, str) and not same(p)]
        spec = PathFinder.find_spec("sitecustomize", paths)
        if spec is None or spec.loader is None:
            return
        if spec.origin and os.path.abspath(spec.origin) == os.path.abspath(__file__):
            return
        module = importlib.util.module_from_spec(spec)
    except Exception:
        return
    # From here on it is the shadowed module's own start-up: it runs as
    # ``sitecustomize`` and its errors are reported by ``site`` as usual.
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


try:
    _leakspy_start_probe()
finally:
    del _leakspy_start_probe
_leakspy_chain()
del _leakspy_chain
