"""The probe started in a process that is already running (``leakspy attach``).

``leakspy attach PID`` has the interpreter run a few lines of its own (a
pending call on 3.8-3.13, ``sys.remote_exec`` on 3.14+) in its main thread,
between two bytecodes. Those lines import this package from the probe's
folder and call :func:`start` with the monitor's socket and settings: the
process never had ``LEAKSPY_PROBE_*`` in its environment, and the probe
leaves the environment alone (the job's own subprocesses must not inherit a
socket that goes away with the monitor).

From there the probe is the one ``leakspy run`` starts, with one
difference: ``torch.optim`` was imported long ago, so the optimizer hook is
registered at once instead of on import. When the monitor goes away (the
end of ``--duration``, Ctrl-C), the probe's next message finds the socket
closed and the probe switches itself off for good: hooks removed, thread
stopped, the job untouched.
"""


def start(socket_path, budget, census):
    """Never raises: the caller runs inside the user's job."""
    try:
        from . import _probe

        _probe.start(socket_path=socket_path, budget=budget, census=census, attached=True)
    except Exception:
        pass


def active():
    """Whether a probe runs in this process (never raises)."""
    try:
        from . import _probe

        st = _probe.S
        return st is not None and st.active
    except Exception:
        return False


def stop():
    """Switches the probe off now, as at the process's exit (its last step
    count sent, hooks out, thread stopped, socket closed): the code that
    started it in this process (``leakspy.watch()``) is done watching and
    the process goes on. Never raises."""
    try:
        from . import _probe

        _probe._at_exit()
        _probe._switch_off()
    except Exception:
        pass
