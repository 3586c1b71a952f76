"""``python -m leakspy``: runs the ``leakspy`` binary installed with this package.

Useful where the environment's ``bin`` folder is not on ``PATH`` (a notebook, a
cluster job started with an absolute interpreter path).
"""

import os
import sys
import sysconfig


def find_leakspy_bin():
    """Path of the ``leakspy`` binary that ``pip install`` put beside this package."""
    exe = "leakspy" + (sysconfig.get_config_var("EXE") or "")
    candidates = [sysconfig.get_path("scripts")]
    # `pip install --user` puts scripts in the user scheme.
    if sys.version_info >= (3, 10):
        user_scheme = sysconfig.get_preferred_scheme("user")
    elif os.name == "nt":
        user_scheme = "nt_user"
    else:
        user_scheme = "posix_user"
    try:
        candidates.append(sysconfig.get_path("scripts", scheme=user_scheme))
    except KeyError:
        pass
    # A target install (`pip install --target DIR`) keeps bin/ next to the package.
    candidates.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bin"))
    for d in candidates:
        path = os.path.join(d, exe)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise FileNotFoundError(
        "the leakspy binary was not found beside the leakspy package (looked in: %s); "
        "reinstall with `pip install leakspy`" % ", ".join(candidates)
    )


def _run():
    path = find_leakspy_bin()
    if os.name == "nt":  # pragma: no cover - leakspy is Linux-only today
        import subprocess

        sys.exit(subprocess.call([path] + sys.argv[1:]))
    os.execv(path, [path] + sys.argv[1:])


if __name__ == "__main__":
    _run()
