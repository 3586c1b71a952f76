"""`pip install .` as a user does it: a fresh virtual environment, the
project's pyproject.toml (maturin builds the Rust binary), then the installed
`leakspy` command, `python -m leakspy`, the importable package, the pytest
plugin found through its entry point, and a `leakspy run` whose probe comes
from the installed binary.

The build uses cargo's dev profile (MATURIN_PEP517_ARGS=--profile dev) so it
reuses what `cargo test` already compiled; the release wheel differs only in
optimisation. Set LEAKSPY_INSTALL_RELEASE=1 to build exactly what a user gets.
"""

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _clean_env(**extra):
    env = dict(os.environ)
    # The installed package and binary must be the ones found, not this checkout's.
    for k in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTEST_ADDOPTS", "LEAKSPY_BIN"):
        env.pop(k, None)
    env.update(extra)
    return env


def _run(args, cwd=None, env=None, check=True, timeout=900):
    p = subprocess.run(
        [str(a) for a in args],
        cwd=str(cwd) if cwd else None,
        env=env or _clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        universal_newlines=True,
        timeout=timeout,
    )
    if check and p.returncode != 0:
        raise AssertionError(
            "%s exited %d\nstdout:\n%s\nstderr:\n%s" % (args, p.returncode, p.stdout, p.stderr)
        )
    return p


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    if shutil.which("cargo") is None:
        pytest.skip("cargo is needed to build the wheel")
    venv = tmp_path_factory.mktemp("pip-install") / "venv"
    base = getattr(sys, "_base_executable", None) or sys.executable
    _run([base, "-m", "venv", venv])
    py = venv / "bin" / "python"
    extra = {}
    if os.environ.get("LEAKSPY_INSTALL_RELEASE") != "1":
        extra["MATURIN_PEP517_ARGS"] = "--profile dev"
    _run(
        [py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", str(ROOT), "pytest"],
        env=_clean_env(**extra),
    )
    return venv


def test_the_command_and_the_module_are_installed(installed):
    leakspy = installed / "bin" / "leakspy"
    assert leakspy.is_file() and os.access(str(leakspy), os.X_OK)
    cargo_version = None
    for line in (ROOT / "Cargo.toml").read_text().splitlines():
        if line.startswith("version = "):
            cargo_version = line.split('"')[1]
            break
    out = _run([leakspy, "--version"]).stdout
    assert out.strip() == "leakspy %s" % cargo_version
    # `python -m leakspy` finds the same binary (no PATH needed).
    assert _run([installed / "bin" / "python", "-m", "leakspy", "--version"]).stdout == out
    where = _run(
        [installed / "bin" / "python", "-c", "import leakspy, os; print(leakspy.__file__); leakspy.step()"]
    ).stdout.strip()
    assert where.startswith(str(installed)), where


def test_check_through_the_installed_command(installed):
    p = _run(
        [installed / "bin" / "leakspy", "check", "--output-format", "json", ROOT / "examples" / "leaky_train.py"],
        check=False,
    )
    assert p.returncode == 1, p.stderr
    assert '"code": "LS002"' in p.stdout


def test_run_injects_the_probe_from_the_installed_binary(installed, tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(
        textwrap.dedent(
            """
            import leakspy
            kept = []
            for i in range(300):
                kept.append(bytearray(1024))
                leakspy.step()
            """
        )
    )
    trace = tmp_path / "t.jsonl"
    p = _run(
        [
            installed / "bin" / "leakspy", "run", "-q", "--trace", trace, "--",
            installed / "bin" / "python", script,
        ],
        check=False,
    )
    assert p.returncode == 0, p.stderr
    kinds = trace.read_text()
    assert '"kind":"probe"' in kinds, p.stderr
    assert '"source":"manual"' in kinds, p.stderr


def test_pytest_finds_the_plugin_by_its_entry_point(installed, tmp_path):
    # No -p option and no conftest: the `pytest11` entry point loads it.
    p = _run([installed / "bin" / "python", "-m", "pytest", "--markers"], cwd=tmp_path)
    assert "@pytest.mark.leakspy" in p.stdout, p.stdout
    test = tmp_path / "test_leaky.py"
    test.write_text(
        textwrap.dedent(
            """
            import pytest

            class Recorder:
                def __init__(self):
                    self.seen = []

            REC = Recorder()

            @pytest.mark.leakspy(steps=60, warmup=10)
            def test_leaks():
                REC.seen.append({"step": object()})

            @pytest.mark.leakspy(steps=60, warmup=10)
            def test_clean():
                scratch = [object() for _ in range(10)]
                del scratch
            """
        )
    )
    p = _run([installed / "bin" / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", test], cwd=tmp_path, check=False)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "1 failed, 1 passed" in p.stdout, p.stdout
    assert "Recorder.seen" in p.stdout, p.stdout


def test_the_pre_commit_hook_fails_a_commit_with_a_leak(installed, tmp_path):
    # The `language: system` hook of .pre-commit-hooks.yaml, with the leakspy
    # this package installed; the `language: python` one builds the same
    # package from the repository (`pip install .`, tested above).
    _run([installed / "bin" / "python", "-m", "pip", "install", "--quiet",
          "--disable-pip-version-check", "pre-commit"])
    repo = tmp_path / "project"
    repo.mkdir()
    (repo / "train.py").write_text((ROOT / "examples" / "leaky_train.py").read_text())
    (repo / "clean.py").write_text("def add(a, b):\n    return a + b\n")
    _run(["git", "init", "-q"], cwd=repo)
    _run(["git", "add", "."], cwd=repo)
    env = _clean_env(PATH=str(installed / "bin") + os.pathsep + os.environ.get("PATH", ""))
    pre_commit = installed / "bin" / "pre-commit"
    bad = _run([pre_commit, "try-repo", ROOT, "leakspy-check-system", "--files", "train.py"],
               cwd=repo, env=env, check=False)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "LS002" in bad.stdout and "Failed" in bad.stdout, bad.stdout
    good = _run([pre_commit, "try-repo", ROOT, "leakspy-check-system", "--files", "clean.py"],
                cwd=repo, env=env, check=False)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "Passed" in good.stdout, good.stdout
