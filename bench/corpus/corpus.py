#!/usr/bin/env python3
"""The real-world corpus of `leakspy check`: judged findings on code nobody here wrote.

Usage:
  bench/corpus/corpus.py fetch                      download and unpack the packages
  bench/corpus/corpus.py verify [--leakspy BIN]     every finding at default settings must be
                                                    judged true (exit 1 naming each one that is not)
  bench/corpus/corpus.py list [--select ALL]        findings not judged yet, with their code
  bench/corpus/corpus.py report                     precision per rule, default and ALL (Markdown)

The packages are pinned in bench/corpus/packages.txt. `fetch` runs `pip download --no-deps`
for each into a cache outside the repository ($LEAKSPY_CORPUS_CACHE, default
~/.cache/leakspy-corpus), reused when present, and unpacks only their `.py` files. torch's own
sources (the project's venv, or $LEAKSPY_TORCH_DIR) are judged too: library code, not training
code. Judgements live in bench/corpus/judgements.txt, one finding a line:

  PACKAGE-VERSION/PATH:LINE RULE true|false REASON

`true` with why the memory it keeps grows per training step, `false` with why it does not.
"""

import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
# LEAKSPY_CORPUS_PACKAGES: another list, for tests of the fetch itself.
PACKAGES = os.environ.get("LEAKSPY_CORPUS_PACKAGES") or os.path.join(HERE, "packages.txt")
JUDGEMENTS = os.path.join(HERE, "judgements.txt")


def cache_dir():
    return os.environ.get("LEAKSPY_CORPUS_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "leakspy-corpus")


def packages():
    """(name, version, dist) for each line of packages.txt."""
    out = []
    with open(PACKAGES) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            spec, dist = line.split()
            name, version = spec.split("==")
            if dist not in ("sdist", "wheel"):
                sys.exit(f"{PACKAGES}: `{line}`: the distribution must be sdist or wheel")
            out.append((name, version, dist))
    return out


def tree_name(name, version):
    return f"{name}-{version}"


def unpack(archive, dest):
    """Only the `.py` files: what `check` reads, and nothing a later tool might pick up.

    Safe when several processes fetch at once (two test binaries on a cold cache): each
    unpacks into its own temporary folder (outside `src/`, which `check` walks) and renames it
    into place; the first rename wins and the others throw their copy away."""
    scratch = os.path.join(os.path.dirname(os.path.dirname(dest)), "tmp")
    os.makedirs(scratch, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch, prefix=os.path.basename(dest) + "-") as tmp:
        if archive.endswith((".tar.gz", ".tgz", ".tar.bz2")):
            with tarfile.open(archive) as tar:
                members = [m for m in tar.getmembers() if m.isfile() and m.name.endswith(".py")]
                tar.extractall(tmp, members=members, filter="data")
            # An sdist holds one folder, NAME-VERSION/: its contents are the tree.
            entries = os.listdir(tmp)
            root = os.path.join(tmp, entries[0]) if len(entries) == 1 else tmp
        else:
            with zipfile.ZipFile(archive) as z:
                for n in z.namelist():
                    if n.endswith(".py") and not n.startswith("/") and ".." not in n.split("/"):
                        z.extract(n, tmp)
            root = tmp
        if root == tmp:
            # The temporary folder itself is removed on exit: move its contents to a folder
            # of their own first.
            inner = os.path.join(tmp, ".tree")
            os.makedirs(inner)
            for e in os.listdir(tmp):
                if e != ".tree":
                    os.rename(os.path.join(tmp, e), os.path.join(inner, e))
            root = inner
        try:
            os.rename(root, dest)
        except OSError:
            # Another process put the same tree in place first (rename onto a non-empty
            # folder fails): theirs is as good as ours.
            if not os.path.isdir(dest):
                raise


def fetch_one(name, version, dist, cache):
    dest = os.path.join(cache, "src", tree_name(name, version))
    if os.path.isdir(dest):
        return dest
    dists = os.path.join(cache, "dist", tree_name(name, version))
    os.makedirs(dists, exist_ok=True)
    if not os.listdir(dists):
        # The package's own sdist; its build requirements (pip prepares its metadata) come as
        # wheels, so nothing is compiled.
        only = ["--no-binary", name] if dist == "sdist" else ["--only-binary", ":all:"]
        scratch = os.path.join(cache, "tmp")
        os.makedirs(scratch, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=scratch) as tmp:
            proc = subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                 "--disable-pip-version-check", *only, "-d", tmp, f"{name}=={version}"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if proc.returncode != 0:
                raise RuntimeError(f"pip download {name}=={version} ({dist}) failed:\n"
                                   f"{proc.stdout[-3000:]}")
            (got,) = os.listdir(tmp)
            try:
                # Atomic: a process listing `dists` sees no archive or a whole one.
                os.rename(os.path.join(tmp, got), os.path.join(dists, got))
            except OSError:
                if not os.listdir(dists):
                    raise
    (archive,) = [os.path.join(dists, f) for f in os.listdir(dists)]
    unpack(archive, dest)
    return dest


def fetch(quiet=False):
    """Downloads (when not cached) and unpacks every package; returns their trees."""
    cache = cache_dir()
    os.makedirs(os.path.join(cache, "src"), exist_ok=True)
    pkgs = packages()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(fetch_one, n, v, d, cache) for n, v, d in pkgs]
        errors = []
        trees = []
        for fut, (n, v, _) in zip(futures, pkgs):
            try:
                trees.append(fut.result())
            except Exception as e:  # one message per package that could not be had
                errors.append(str(e))
    if errors:
        sys.exit("corpus: could not fetch every package (this needs PyPI access once; the "
                 "cache is then reused):\n" + "\n".join(errors))
    if not quiet:
        files = sum(1 for t in trees for _, _, fs in os.walk(t) for f in fs if f.endswith(".py"))
        print(f"corpus: {len(trees)} packages, {files} Python files in {cache}/src",
              file=sys.stderr)
    return trees


def torch_tree():
    """(display prefix, folder) of torch's installed sources."""
    torch = os.environ.get("LEAKSPY_TORCH_DIR")
    if not torch:
        py = os.environ.get("LEAKSPY_PYTHON") or os.path.join(ROOT, ".venv", "bin", "python")
        torch = subprocess.check_output(
            [py, "-c", "import os, torch; print(os.path.dirname(torch.__file__))"],
            text=True).strip()
    version = "unknown"
    with open(os.path.join(torch, "version.py")) as f:
        m = re.search(r"__version__\s*=\s*['\"]([^'\"+]+)", f.read())
        if m:
            version = m.group(1)
    return f"torch-{version}", torch


def leakspy_binary(given):
    if given:
        return os.path.abspath(given)
    binary = os.path.join(ROOT, "target", "release", "leakspy")
    subprocess.check_call(["cargo", "build", "--release", "-q", "-p", "leakspy"], cwd=ROOT)
    return binary


class Finding:
    def __init__(self, key, rule, message, fix, line_text):
        self.key, self.rule, self.message, self.fix, self.line_text = (
            key, rule, message, fix, line_text)

    @property
    def id(self):
        return (self.key, self.rule)


def run_check(binary, folder, cwd, prefix, select):
    """The findings of `check FOLDER` (run from CWD), keyed `PREFIX/PATH:LINE`."""
    cmd = [binary, "check", folder, "--output-format", "json", "--exit-zero"]
    if select:
        cmd += ["--select", select]
    proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    findings = []
    lines_of = {}
    for item in json.loads(proc.stdout):
        if item["code"] == "syntax-error":
            continue
        path = item["filename"]
        rel = os.path.relpath(os.path.join(cwd, path), os.path.join(cwd, folder))
        row = item["location"]["row"]
        if path not in lines_of:
            with open(os.path.join(cwd, path), encoding="utf-8", errors="replace") as f:
                lines_of[path] = f.read().splitlines()
        text = lines_of[path][row - 1].strip() if row <= len(lines_of[path]) else ""
        fix = item.get("fix") or None
        findings.append(Finding(f"{prefix}/{rel}:{row}", item["code"], item["message"],
                                fix, text))
    return findings


def all_findings(binary, select=None, with_torch=True, only=None):
    trees = fetch(quiet=True)
    src = os.path.dirname(trees[0])
    if only:
        # One package's tree (`NAME-VERSION`), torch left out.
        (tree,) = [t for t in trees if os.path.basename(t).startswith(only + "-")]
        name = os.path.basename(tree)
        return run_check(binary, name, src, name, select)
    out = run_check(binary, ".", src, "", select)
    for f in out:
        f.key = f.key.lstrip("/")
    if with_torch:
        prefix, torch = torch_tree()
        out += run_check(binary, os.path.basename(torch), os.path.dirname(torch), prefix,
                         select)
    return out


def judgements(path=None):
    """{(key, rule): (verdict, reason)}."""
    path = path or JUDGEMENTS
    out = {}
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            parts = line.split(None, 3)
            if len(parts) < 4 or parts[2] not in ("true", "false"):
                sys.exit(f"{path}:{n}: expected `PACKAGE/PATH:LINE RULE true|false "
                         f"REASON`, found `{line}`")
            key, rule, verdict, reason = parts
            if (key, rule) in out:
                sys.exit(f"{path}:{n}: {key} {rule} is judged twice")
            out[(key, rule)] = (verdict == "true", reason)
    return out


def describe(f):
    fix = ""
    if f.fix:
        fix = f"\n    fix ({f.fix.get('applicability')}): {f.fix.get('message')}"
    return f"{f.key} {f.rule}\n    | {f.line_text}\n    {f.message}{fix}"


def cmd_verify(args):
    binary = leakspy_binary(args.leakspy)
    judged = judgements(args.judgements)
    findings = all_findings(binary, only=args.package)
    bad = []
    for f in findings:
        verdict = judged.get(f.id)
        if verdict is None:
            bad.append(("not judged", f))
        elif not verdict[0]:
            bad.append((f"judged false: {verdict[1]}", f))
    print(f"corpus: {len(findings)} findings at default settings, "
          f"{len(findings) - len(bad)} judged true", file=sys.stderr)
    if bad:
        for why, f in bad:
            print(f"{why}:\n{describe(f)}\n")
        print(f"{len(bad)} finding(s) at default settings are not judged true. Judge each "
              f"one by reading its code (bench/corpus/judgements.txt), or fix the false "
              f"alarm in the analysis.")
        return 1
    return 0


def cmd_list(args):
    binary = leakspy_binary(args.leakspy)
    judged = judgements()
    findings = all_findings(binary, args.select)
    shown = 0
    for f in findings:
        if f.id in judged and not args.all:
            continue
        shown += 1
        verdict = judged.get(f.id)
        mark = "" if verdict is None else f"  [judged {str(verdict[0]).lower()}: {verdict[1]}]"
        print(describe(f) + mark + "\n")
    print(f"{shown} of {len(findings)} findings shown", file=sys.stderr)
    return 0


def tally(findings, judged):
    """{rule: [findings, true, false, unjudged]}."""
    out = {}
    for f in findings:
        row = out.setdefault(f.rule, [0, 0, 0, 0])
        row[0] += 1
        v = judged.get(f.id)
        if v is None:
            row[3] += 1
        elif v[0]:
            row[1] += 1
        else:
            row[2] += 1
    return out


def table(title, rows):
    lines = [f"**{title}**", "",
             "| rule | findings | judged true | judged false | not judged | precision |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    total = [0, 0, 0, 0]
    for rule in sorted(rows):
        r = rows[rule]
        total = [a + b for a, b in zip(total, r)]
        lines.append(f"| {rule} | {r[0]} | {r[1]} | {r[2]} | {r[3]} | {precision(r)} |")
    lines.append(f"| all | {total[0]} | {total[1]} | {total[2]} | {total[3]} | "
                 f"{precision(total)} |")
    return "\n".join(lines) + "\n"


def precision(r):
    judged = r[1] + r[2]
    return f"{100 * r[1] / judged:.0f} %" if judged else "-"


def cmd_report(args):
    binary = leakspy_binary(args.leakspy)
    judged = judgements()
    trees = fetch(quiet=True)
    files = sum(1 for t in trees for _, _, fs in os.walk(t) for f in fs if f.endswith(".py"))
    prefix, torch = torch_tree()
    torch_files = sum(1 for _, _, fs in os.walk(torch) for f in fs if f.endswith(".py"))
    print(f"Corpus: {len(trees)} packages ({files} Python files) from "
          f"`bench/corpus/packages.txt`; torch's sources ({prefix}, {torch_files} files) apart.\n")
    for select, label in ((None, "default rules"), ("ALL", "`--select ALL`")):
        findings = all_findings(binary, select)
        corpus = [f for f in findings if not f.key.startswith(prefix + "/")]
        lib = [f for f in findings if f.key.startswith(prefix + "/")]
        print(table(f"PyPI corpus, {label}", tally(corpus, judged)))
        print(table(f"torch's sources, {label}", tally(lib, judged)))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("fetch")
    for name in ("verify", "list", "report"):
        p = sub.add_parser(name)
        p.add_argument("--leakspy", help="the leakspy binary (default: a release build)")
        if name == "verify":
            p.add_argument("--judgements", help="the judgements file (default: the committed one)")
            p.add_argument("--package", help="check only this package of the corpus (NAME)")
        if name == "list":
            p.add_argument("--select", help="rules, as for `check --select` (ALL: every rule)")
            p.add_argument("--all", action="store_true", help="judged findings too")
    args = ap.parse_args()
    if args.cmd == "fetch":
        fetch()
        return 0
    return {"verify": cmd_verify, "list": cmd_list, "report": cmd_report}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
