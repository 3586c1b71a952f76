"""pytest plugin: ``@pytest.mark.leakspy(steps=..., warmup=...)`` runs the
body of a test many times through :func:`leakspy.assert_no_leak` and fails
the test with its :class:`leakspy.LeakError` when something grows with every
run.

Fixtures are set up once, before the first run, and torn down after the
last: every run of the body sees the same fixture values (the same model,
the same ``tmp_path``). What the body keeps in them from one run to the next
is exactly what the check is about.

Loaded through the ``pytest11`` entry point ``leakspy`` of the installed
package, or with ``-p leakspy.pytest_plugin``; both at once are fine.
"""

import inspect

import pytest

_MARKER = "leakspy"
_NAMES = ("leakspy", "leakspy.pytest_plugin")
_ARGS = ("steps", "warmup")
_KWARGS = ("steps", "warmup", "censuses", "creation_sites")


class _Alias(object):
    """Stands for this module under its other plugin name (no hooks)."""


def pytest_addhooks(pluginmanager):
    # Called as this module is registered, under either name. The other
    # name gets a placeholder, so that the second way of loading this same
    # module (the entry point after -p, or -p / `pytest_plugins` after the
    # entry point) finds it registered and skips it: pluggy refuses one
    # module under two names.
    for name in _NAMES:
        if pluginmanager.get_plugin(name) is None and not pluginmanager.is_blocked(name):
            pluginmanager.register(_Alias(), name)


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "leakspy(steps=200, warmup=20, censuses=16, creation_sites=True): run the test "
        "body `steps` times through leakspy.assert_no_leak and fail when something grows "
        "with every run (fixtures are set up once)",
    )


def _options(marker):
    """The marker's arguments for assert_no_leak, or a ValueError."""
    from leakspy._assert import DEFAULT_CENSUSES, DEFAULT_STEPS, DEFAULT_WARMUP, check_arguments

    args = marker.args
    if len(args) > len(_ARGS):
        raise ValueError("takes at most %d positional arguments (steps, warmup), got %d"
                         % (len(_ARGS), len(args)))
    kwargs = dict(zip(_ARGS, args))
    for k, v in marker.kwargs.items():
        if k not in _KWARGS:
            raise ValueError("unknown argument %r (known: %s)" % (k, ", ".join(_KWARGS)))
        if k in kwargs:
            raise ValueError("%s given twice" % k)
        kwargs[k] = v
    check_arguments(kwargs.get("steps", DEFAULT_STEPS), kwargs.get("warmup", DEFAULT_WARMUP),
                    kwargs.get("censuses", DEFAULT_CENSUSES))
    return kwargs


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem):
    marker = pyfuncitem.get_closest_marker(_MARKER)
    if marker is None:
        return None
    __tracebackhide__ = True
    func = pyfuncitem.obj
    if inspect.iscoroutinefunction(func) or inspect.isasyncgenfunction(func):
        pytest.fail("@pytest.mark.leakspy does not support async tests: call "
                    "leakspy.assert_no_leak from the test instead", pytrace=False)
    try:
        kwargs = _options(marker)
        wrong = None
    except ValueError as e:
        wrong = str(e)
    if wrong is not None:
        # The marker is wrong, not the code under test: say which test.
        pytest.fail("@pytest.mark.leakspy on %s: %s" % (pyfuncitem.nodeid, wrong), pytrace=False)
    funcargs = pyfuncitem.funcargs
    testargs = {arg: funcargs[arg] for arg in pyfuncitem._fixtureinfo.argnames}

    def run_body():
        __tracebackhide__ = True
        func(**testargs)

    run_body.__name__ = getattr(func, "__name__", "test")
    run_body.__qualname__ = getattr(func, "__qualname__", run_body.__name__)
    from leakspy._assert import assert_no_leak

    roots = {repr(arg): funcargs[arg] for arg in pyfuncitem._fixtureinfo.argnames
             if arg in funcargs}
    assert_no_leak(run_body, _roots=roots, **kwargs)
    return True
