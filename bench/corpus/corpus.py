#!/usr/bin/env python3
"""The real-world corpus of `leakspy check`: judged findings on code nobody here wrote.

Usage:
  bench/corpus/corpus.py fetch [--part P]           download and unpack the packages
  bench/corpus/corpus.py verify [--part P] [--leakspy BIN]
                                                    every finding at default settings must be
                                                    judged true or be a known false alarm (exit 1
                                                    naming each one that is not)
  bench/corpus/corpus.py list [--part P] [--select ALL]
                                                    findings not judged yet, with their code
  bench/corpus/corpus.py report [--part P]          precision per rule, default and ALL (Markdown)

P is `train` (the default), `test` or `all`. The packages are pinned in
bench/corpus/packages.txt; bench/corpus/split.txt lists the held-out test part, drawn once at
random from the packages no rule work had looked at. The train part is every other package
plus torch's own sources (the project's venv, or $LEAKSPY_TORCH_DIR: library code, not
training code). Rule work is tuned on the train part only; the test part's findings are judged
once, when the rule work is done, and their precision is reported apart.

`fetch` runs `pip download --no-deps` for each package into a cache outside the repository
($LEAKSPY_CORPUS_CACHE, default ~/.cache/leakspy-corpus2), reused when present, and unpacks
their `.py` files and `.ipynb` notebooks. Judgements live in bench/corpus/judgements.txt, one
finding a line:

  PACKAGE-VERSION/PATH:LINE RULE true|false REASON

(in a notebook, `PATH:cellN:LINE`, the line counted in cell N as `check` numbers them). `true`
with why the memory it keeps grows per training step, `false` with why it does not. A finding
judged false that the analysis does not fix yet is listed in bench/corpus/known-false.txt:
`verify` lets it pass, `report` counts it as false, and `verify` fails once it is no longer
reported, so the list only shrinks.
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
KNOWN_FALSE = os.path.join(HERE, "known-false.txt")
# LEAKSPY_CORPUS_SPLIT: another split, for tests of the parts themselves.
SPLIT = os.environ.get("LEAKSPY_CORPUS_SPLIT") or os.path.join(HERE, "split.txt")
PARTS = ("train", "test", "all")


def cache_dir():
    # `leakspy-corpus2`: its trees hold notebooks too. A cache of the first layout
    # (`leakspy-corpus`, `.py` files only) would silently lack them, so it is not reused.
    return os.environ.get("LEAKSPY_CORPUS_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "leakspy-corpus2")


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


def test_part():
    """The names of the held-out test part (bench/corpus/split.txt); each must be in the corpus."""
    if not os.path.exists(SPLIT):
        return set()
    specs = set()
    with open(SPLIT) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                specs.add(line)
    # Another package list (the fetch's own tests) has nothing to do with the split.
    unknown = specs - {f"{n}=={v}" for n, v, _ in packages()}
    if unknown and PACKAGES == os.path.join(HERE, "packages.txt"):
        sys.exit(f"{SPLIT}: not in {PACKAGES} (NAME==VERSION): {', '.join(sorted(unknown))}")
    return {s.split("==")[0] for s in specs}


def part_packages(part):
    """The packages of one part: `train` (all but the test part), `test` or `all`."""
    held_out = test_part()
    keep = {"train": lambda n: n not in held_out, "test": lambda n: n in held_out,
            "all": lambda n: True}[part]
    return [p for p in packages() if keep(p[0])]


def tree_name(name, version):
    return f"{name}-{version}"


def wanted(member):
    """What `check` reads (Python files and notebooks), and nothing a later tool might pick up."""
    return member.endswith((".py", ".ipynb"))


def unpack(archive, dest):
    """Only the Python files and notebooks (`wanted`).

    Safe when several processes fetch at once (two test binaries on a cold cache): each
    unpacks into its own temporary folder (outside `src/`, which `check` walks) and renames it
    into place; the first rename wins and the others throw their copy away."""
    scratch = os.path.join(os.path.dirname(os.path.dirname(dest)), "tmp")
    os.makedirs(scratch, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch, prefix=os.path.basename(dest) + "-") as tmp:
        if archive.endswith((".tar.gz", ".tgz", ".tar.bz2")):
            with tarfile.open(archive) as tar:
                members = [m for m in tar.getmembers() if m.isfile() and wanted(m.name)]
                tar.extractall(tmp, members=members, filter="data")
            # An sdist holds one folder, NAME-VERSION/: its contents are the tree.
            entries = os.listdir(tmp)
            root = os.path.join(tmp, entries[0]) if len(entries) == 1 else tmp
        else:
            with zipfile.ZipFile(archive) as z:
                for n in z.namelist():
                    if wanted(n) and not n.startswith("/") and ".." not in n.split("/"):
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


def count_files(trees):
    """(Python files, notebooks) in the trees."""
    py = nb = 0
    for t in trees:
        for _, _, fs in os.walk(t):
            py += sum(1 for f in fs if f.endswith(".py"))
            nb += sum(1 for f in fs if f.endswith(".ipynb"))
    return py, nb


def fetch(quiet=False, part="all"):
    """Downloads (when not cached) and unpacks the packages of a part; returns their trees."""
    cache = cache_dir()
    os.makedirs(os.path.join(cache, "src"), exist_ok=True)
    pkgs = part_packages(part)
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
        py, nb = count_files(trees)
        print(f"corpus: {len(trees)} packages, {py} Python files and {nb} notebooks in "
              f"{cache}/src", file=sys.stderr)
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


def source_lines(path, cell):
    """The lines `check` numbers a finding's row in: the file's, or in a notebook the cell's
    (`cell` 1-based among all cells, as `check` reports it)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        if cell is None:
            return f.read().splitlines()
        try:
            source = json.load(f)["cells"][cell - 1].get("source", "")
        except (ValueError, KeyError, IndexError):
            return []
    return ("".join(source) if isinstance(source, list) else source).splitlines()


def run_check(binary, folders, cwd, prefix, select):
    """The findings of `check FOLDER...` (run from CWD), keyed `PREFIX/PATH:LINE` with PATH
    relative to CWD (`PREFIX/PATH:cellN:LINE` in a notebook)."""
    cmd = [binary, "check", *folders, "--output-format", "json", "--exit-zero"]
    if select:
        cmd += ["--select", select]
    proc = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd[:3])} ... failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    findings = []
    lines_of = {}
    for item in json.loads(proc.stdout):
        if item["code"] == "syntax-error":
            continue
        path = item["filename"]
        rel = os.path.relpath(os.path.join(cwd, path), cwd)
        row = item["location"]["row"]
        cell = item.get("cell")
        if (path, cell) not in lines_of:
            lines_of[(path, cell)] = source_lines(os.path.join(cwd, path), cell)
        lines = lines_of[(path, cell)]
        text = lines[row - 1].strip() if row <= len(lines) else ""
        fix = item.get("fix") or None
        where = f"{rel}:{row}" if cell is None else f"{rel}:cell{cell}:{row}"
        key = f"{prefix}/{where}" if prefix else where
        findings.append(Finding(key, item["code"], item["message"], fix, text))
    return findings


def all_findings(binary, select=None, part="train", only=None):
    """The findings on one part's packages (torch's sources with the train part), or on one
    package (`only`: its NAME; torch left out)."""
    trees = fetch(quiet=True, part="all" if only else part)
    if only:
        trees = [t for t in trees if os.path.basename(t).startswith(only + "-")]
        if len(trees) != 1:
            sys.exit(f"corpus: no package `{only}` in {PACKAGES}")
    src = os.path.dirname(trees[0]) if trees else cache_dir()
    # Each tree is named, so a tree of a package no longer listed (or of the other part) that
    # the cache still holds is never checked.
    out = run_check(binary, [os.path.basename(t) for t in trees], src, "", select) if trees else []
    if part in ("train", "all") and not only:
        prefix, torch = torch_tree()
        lib = run_check(binary, [os.path.basename(torch)], os.path.dirname(torch), "", select)
        for f in lib:
            # `torch/PATH` -> `torch-VERSION/PATH`: a judgement names a line of one version.
            f.key = prefix + f.key[len(os.path.basename(torch)):]
        out += lib
    return out


def read_verdicts(path, what):
    """(key, rule, rest of the line) for each line of a judgement-like file."""
    if not os.path.exists(path):
        return
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            parts = line.split(None, 2)
            if len(parts) < 2:
                sys.exit(f"{path}:{n}: expected `{what}`, found `{line}`")
            yield n, parts[0], parts[1], parts[2] if len(parts) > 2 else ""


def judgements(path=None):
    """{(key, rule): (verdict, reason)}."""
    path = path or JUDGEMENTS
    what = "PACKAGE/PATH:LINE RULE true|false REASON"
    out = {}
    for n, key, rule, rest in read_verdicts(path, what):
        verdict, _, reason = rest.partition(" ")
        if verdict not in ("true", "false") or not reason.strip():
            sys.exit(f"{path}:{n}: expected `{what}`, found `{key} {rule} {rest}`")
        if (key, rule) in out:
            sys.exit(f"{path}:{n}: {key} {rule} is judged twice")
        out[(key, rule)] = (verdict == "true", reason.strip())
    return out


def known_false(judged, path=None):
    """The findings judged false that the analysis does not fix yet: {(key, rule)}. Each must
    be judged false in the judgements."""
    path = path or KNOWN_FALSE
    out = set()
    for n, key, rule, _ in read_verdicts(path, "PACKAGE/PATH:LINE RULE [NOTE]"):
        verdict = judged.get((key, rule))
        if verdict is None or verdict[0]:
            sys.exit(f"{path}:{n}: {key} {rule} is not judged false in the judgements: a known "
                     f"false alarm must be judged false there first")
        out.add((key, rule))
    return out


def describe(f):
    fix = ""
    if f.fix:
        fix = f"\n    fix ({f.fix.get('applicability')}): {f.fix.get('message')}"
    return f"{f.key} {f.rule}\n    | {f.line_text}\n    {f.message}{fix}"


def in_scope(key, part, only):
    """Whether a judged key belongs to what was checked: one package, or one part."""
    package = key.split("/", 1)[0]
    if only:
        return package.startswith(only + "-") and package[len(only) + 1:][:1].isdigit()
    names = {tree_name(n, v) for n, v, _ in part_packages(part)}
    if part in ("train", "all"):
        names.add(torch_tree()[0])
    return package in names


def cmd_verify(args):
    binary = leakspy_binary(args.leakspy)
    judged = judgements(args.judgements)
    known = known_false(judged, args.known_false)
    findings = all_findings(binary, part=args.part, only=args.package)
    bad = []
    tolerated = 0
    for f in findings:
        verdict = judged.get(f.id)
        if verdict is None:
            bad.append(("not judged", f))
        elif not verdict[0]:
            if f.id in known:
                tolerated += 1
            else:
                bad.append((f"judged false: {verdict[1]}", f))
    reported = {f.id for f in findings}
    fixed = sorted(k for k in known if k not in reported and in_scope(k[0], args.part, args.package))
    scope = f"package {args.package}" if args.package else f"the {args.part} part"
    print(f"corpus ({scope}): {len(findings)} findings at default settings, "
          f"{len(findings) - len(bad) - tolerated} judged true, {tolerated} known false "
          f"alarms (bench/corpus/known-false.txt)", file=sys.stderr)
    for why, f in bad:
        print(f"{why}:\n{describe(f)}\n")
    for key, rule in fixed:
        print(f"known false alarm no longer reported: {key} {rule}\n")
    if bad:
        print(f"{len(bad)} finding(s) at default settings are not judged true. Judge each "
              f"one by reading its code (bench/corpus/judgements.txt), or fix the false "
              f"alarm in the analysis.")
    if fixed:
        print(f"{len(fixed)} known false alarm(s) are no longer reported: remove them from "
              f"bench/corpus/known-false.txt (and FALSE-ALARMS.md), so the list only shrinks.")
    return 1 if bad or fixed else 0


def cmd_list(args):
    binary = leakspy_binary(args.leakspy)
    judged = judgements()
    findings = all_findings(binary, args.select, part=args.part)
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
    known = known_false(judged)
    parts = ["train", "test"] if args.part == "all" else [args.part]
    trees = {p: fetch(quiet=True, part=p) for p in parts}
    prefix = torch_tree()[0]
    for p in parts:
        py, nb = count_files(trees[p])
        print(f"{p.capitalize()} part: {len(trees[p])} packages ({py} Python files, {nb} "
              f"notebooks) from `bench/corpus/packages.txt`"
              + (f"; torch's sources ({prefix}) apart." if p == "train" else
                 " (`bench/corpus/split.txt`)."))
    print()
    for select, label in ((None, "default rules"), ("ALL", "`--select ALL`")):
        findings = all_findings(binary, select, part=args.part)
        lib = [f for f in findings if f.key.startswith(prefix + "/")]
        for p in parts:
            names = {os.path.basename(t) for t in trees[p]}
            mine = [f for f in findings if f.key.split("/", 1)[0] in names]
            print(table(f"PyPI corpus, {p} part, {label}", tally(mine, judged)))
            if select is None and p == "train":
                n = sum(1 for f in mine if f.id in known)
                print(f"Of the judged false, {n} are known false alarms "
                      f"(`bench/corpus/known-false.txt`) that the analysis is yet to fix.\n")
        if lib:
            print(table(f"torch's sources, {label}", tally(lib, judged)))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("fetch", "verify", "list", "report"):
        p = sub.add_parser(name)
        p.add_argument("--part", choices=PARTS, default="all" if name == "fetch" else "train",
                       help="the train part (with torch's sources), the held-out test part, "
                            "or all")
        if name == "fetch":
            continue
        p.add_argument("--leakspy", help="the leakspy binary (default: a release build)")
        if name == "verify":
            p.add_argument("--judgements", help="the judgements file (default: the committed one)")
            p.add_argument("--known-false",
                           help="the known false alarms (default: the committed list)")
            p.add_argument("--package", help="check only this package of the corpus (NAME)")
        if name == "list":
            p.add_argument("--select", help="rules, as for `check --select` (ALL: every rule)")
            p.add_argument("--all", action="store_true", help="judged findings too")
    args = ap.parse_args()
    if args.cmd == "fetch":
        fetch(part=args.part)
        return 0
    return {"verify": cmd_verify, "list": cmd_list, "report": cmd_report}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
