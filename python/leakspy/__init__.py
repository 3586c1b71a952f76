"""leakspy's in-process probe.

Under ``leakspy run`` a bootstrap ``sitecustomize`` starts the probe in every
Python process of the job: it counts optimizer steps, takes a census of the
live objects now and then, and tells the monitor what grows and who holds
it. Nothing needs changing in the job's code.

``leakspy.step()`` marks one unit of work in a loop without an optimizer.
Outside ``leakspy run`` it does nothing, so it can stay in the code.
Importing this package is cheap (it imports neither torch nor the probe).

``with leakspy.watch(): ...`` (or ``@leakspy.watch()``) watches the code it
wraps in this very process, a notebook kernel included: a live line while it
runs, then the diagnosis (under the cell in a notebook). ``%load_ext
leakspy`` adds the ``%leakspy watch`` and ``%%leakspy watch`` magics.

``leakspy.assert_no_leak(step, steps=200, warmup=20)`` checks, in a test,
that calling ``step`` does not leave more behind with every call (it raises
``leakspy.LeakError``, an ``AssertionError``); ``@pytest.mark.leakspy`` does
the same for a whole test. Both load on first use.
"""

__version__ = "0.1.0"
__all__ = ["step", "watch", "assert_no_leak", "LeakError", "__version__"]

# Loaded on first use: the leak check needs the census machinery, which a
# process that only calls step() never pays for.
_LAZY = ("assert_no_leak", "LeakError", "LeakReport", "Leak")


def __getattr__(name):
    if name in _LAZY:
        from . import _assert

        return getattr(_assert, name)
    raise AttributeError("module %r has no attribute %r" % (__name__, name))


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


def watch(budget=None, census=True, live=True, show=True):
    """Watches the code it wraps in this process: ``with leakspy.watch():``
    or ``@leakspy.watch()``. See ``leakspy._notebook.watch``."""
    from . import _notebook

    return _notebook.watch(budget=budget, census=census, live=live, show=show)


def load_ipython_extension(ipython):
    """``%load_ext leakspy``: the ``%leakspy`` and ``%%leakspy`` magics."""
    from . import _notebook

    _notebook.load_ipython_extension(ipython)


def unload_ipython_extension(ipython):
    from . import _notebook

    _notebook.unload_ipython_extension(ipython)

# Set by the probe when it runs in this process.
_step_impl = None


def step():
    """Marks the end of one unit of work (a training step, an episode).

    A no-op when the process is not under ``leakspy run``. Costs a few
    microseconds when it is.
    """
    f = _step_impl
    if f is not None:
        f()
