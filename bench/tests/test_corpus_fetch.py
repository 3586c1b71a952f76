"""The corpus fetch on a cold cache with several processes at once: two test binaries
(`check_corpus`'s two tests) fetch the same packages at the same time on a fresh machine.
Local archives stand in for PyPI's (the cache's `dist/` already holds them), so what races is
the unpacking, which is where it failed (`File exists: ...pfrl-0.4.0.part`)."""

import io
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "corpus.py"


def _sdist(path, name, files):
    with tarfile.open(path, "w:gz") as tar:
        for rel, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{name}/{rel}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _wheel(path, files):
    with zipfile.ZipFile(path, "w") as z:
        for rel, text in files.items():
            z.writestr(rel, text)


def _cold_cache(tmp_path, packages, notebooks=False):
    cache = tmp_path / "cache"
    lines = []
    for i in range(packages):
        name, version = f"pkg{i}", "1.0"
        dists = cache / "dist" / f"{name}-{version}"
        dists.mkdir(parents=True)
        files = {f"{name}/mod{j}.py": f"x = {j}\n" for j in range(40)}
        files[f"{name}/README.txt"] = "not Python: left out\n"
        if notebooks:
            files[f"{name}/examples/train.ipynb"] = '{"cells": [], "nbformat": 4}\n'
        if i % 2:
            _wheel(dists / f"{name}-{version}-py3-none-any.whl", files)
            lines.append(f"{name}=={version} wheel")
        else:
            _sdist(dists / f"{name}-{version}.tar.gz", f"{name}-{version}", files)
            lines.append(f"{name}=={version} sdist")
    listing = tmp_path / "packages.txt"
    listing.write_text("\n".join(lines) + "\n")
    return cache, listing


def test_processes_fetching_one_cold_cache_at_once_all_get_every_tree(tmp_path):
    cache, listing = _cold_cache(tmp_path, packages=12)
    env = dict(os.environ, LEAKSPY_CORPUS_CACHE=str(cache), LEAKSPY_CORPUS_PACKAGES=str(listing))
    procs = [
        subprocess.Popen([sys.executable, str(CORPUS), "fetch"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(4)
    ]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    for code, err in results:
        assert code == 0, err
        assert "12 packages, 480 Python files" in err, err
    src = cache / "src"
    # Every tree whole, nothing half-made left where `check` walks.
    assert sorted(os.listdir(src)) == sorted(f"pkg{i}-1.0" for i in range(12))
    for i in range(12):
        tree = src / f"pkg{i}-1.0" / f"pkg{i}"
        assert sorted(os.listdir(tree)) == sorted(f"mod{j}.py" for j in range(40))
    assert os.listdir(cache / "tmp") == []


def test_a_warm_cache_is_reused_as_it_is(tmp_path):
    cache, listing = _cold_cache(tmp_path, packages=2)
    env = dict(os.environ, LEAKSPY_CORPUS_CACHE=str(cache), LEAKSPY_CORPUS_PACKAGES=str(listing))
    subprocess.run([sys.executable, str(CORPUS), "fetch"], env=env, check=True,
                   capture_output=True)
    marker = cache / "src" / "pkg0-1.0" / "pkg0" / "mod0.py"
    before = marker.stat().st_mtime_ns
    subprocess.run([sys.executable, str(CORPUS), "fetch"], env=env, check=True,
                   capture_output=True)
    assert marker.stat().st_mtime_ns == before


def test_notebooks_are_unpacked_with_the_python_files(tmp_path):
    cache, listing = _cold_cache(tmp_path, packages=2, notebooks=True)
    env = dict(os.environ, LEAKSPY_CORPUS_CACHE=str(cache), LEAKSPY_CORPUS_PACKAGES=str(listing))
    proc = subprocess.run([sys.executable, str(CORPUS), "fetch"], env=env, check=True,
                          capture_output=True, text=True)
    assert "2 packages, 80 Python files and 2 notebooks" in proc.stderr, proc.stderr
    for i in range(2):
        tree = cache / "src" / f"pkg{i}-1.0" / f"pkg{i}"
        assert (tree / "examples" / "train.ipynb").is_file()
        assert not (tree / "README.txt").exists()


def test_a_part_fetches_only_its_packages(tmp_path):
    cache, listing = _cold_cache(tmp_path, packages=4)
    split = tmp_path / "split.txt"
    split.write_text("# held out\npkg1==1.0\npkg2==1.0\n")
    env = dict(os.environ, LEAKSPY_CORPUS_CACHE=str(cache), LEAKSPY_CORPUS_PACKAGES=str(listing),
               LEAKSPY_CORPUS_SPLIT=str(split))
    subprocess.run([sys.executable, str(CORPUS), "fetch", "--part", "test"], env=env, check=True,
                   capture_output=True)
    assert sorted(os.listdir(cache / "src")) == ["pkg1-1.0", "pkg2-1.0"]
    subprocess.run([sys.executable, str(CORPUS), "fetch", "--part", "train"], env=env, check=True,
                   capture_output=True)
    assert sorted(os.listdir(cache / "src")) == [f"pkg{i}-1.0" for i in range(4)]
