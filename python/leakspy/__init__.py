"""leakspy's in-process probe.

Under ``leakspy run`` a bootstrap ``sitecustomize`` starts the probe in every
Python process of the job: it counts optimizer steps, takes a census of the
live objects now and then, and tells the monitor what grows and who holds
it. Nothing needs changing in the job's code.

``leakspy.step()`` marks one unit of work in a loop without an optimizer.
Outside ``leakspy run`` it does nothing, so it can stay in the code.
Importing this package is cheap (it imports neither torch nor the probe).
"""

__version__ = "0.1.0"
__all__ = ["step", "__version__"]

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
