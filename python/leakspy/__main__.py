"""``python -m leakspy``: runs the ``leakspy`` binary installed with this package.

Useful where the environment's ``bin`` folder is not on ``PATH`` (a notebook, a
cluster job started with an absolute interpreter path).
"""

import os
import sys
import sysconfig


def _within(path, folder):
    try:
        return os.path.commonpath([os.path.realpath(path), os.path.realpath(folder)]) == \
            os.path.realpath(folder)
    except ValueError:
        return False


def find_leakspy_bin():
    """Path of the ``leakspy`` binary that ``pip install`` put beside this package.

    Only the install this copy of the package came from counts: a copy imported from a
    checkout (``PYTHONPATH=python``) has no binary beside it, even when the interpreter's
    environment holds another install's."""
    exe = "leakspy" + (sysconfig.get_config_var("EXE") or "")
    here = os.path.dirname(os.path.abspath(__file__))
    schemes = [None]
    # `pip install --user` puts scripts in the user scheme.
    if sys.version_info >= (3, 10):
        schemes.append(sysconfig.get_preferred_scheme("user"))
    elif os.name == "nt":
        schemes.append("nt_user")
    else:
        schemes.append("posix_user")
    candidates = []
    for scheme in schemes:
        kw = {} if scheme is None else {"scheme": scheme}
        try:
            libs = {sysconfig.get_path("purelib", **kw), sysconfig.get_path("platlib", **kw)}
            scripts = sysconfig.get_path("scripts", **kw)
        except KeyError:
            continue
        if any(_within(here, lib) for lib in libs if lib):
            candidates.append(scripts)
    # A target install (`pip install --target DIR`) keeps bin/ next to the package.
    candidates.append(os.path.join(os.path.dirname(here), "bin"))
    for d in candidates:
        path = os.path.join(d, exe)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise FileNotFoundError(
        "the leakspy binary was not found beside the leakspy package (looked in: %s); "
        "install leakspy with its binary: `pip install .` in a leakspy checkout, or "
        "`pip install dist/leakspy-*.whl` after `maturin build --release`" % ", ".join(candidates)
    )


def find_binary():
    """The ``leakspy`` binary for this package's own calls (``assert_no_leak``'s
    verdict, the notebook watch): ``$LEAKSPY_BIN`` when set (a build of a
    checkout: ``target/debug/leakspy``), else the one installed beside this
    package, else the first on ``PATH``; None when there is none."""
    env = os.environ.get("LEAKSPY_BIN")
    if env:
        return env if os.path.isfile(env) and os.access(env, os.X_OK) else None
    try:
        return find_leakspy_bin()
    except FileNotFoundError:
        pass
    import shutil

    return shutil.which("leakspy")


def _run():
    path = find_leakspy_bin()
    if os.name == "nt":  # pragma: no cover - leakspy is Linux-only today
        import subprocess

        sys.exit(subprocess.call([path] + sys.argv[1:]))
    os.execv(path, [path] + sys.argv[1:])


if __name__ == "__main__":
    _run()
