//! The scratch copy of a project that `leakspy fix` edits and runs: the
//! user's files are never written (without `--apply`). It lives in a
//! temporary folder removed when the copy is dropped, however `fix` ends
//! (a proof, an error, Ctrl-C).
//!
//! Source and small files are copied; what a job only reads and would be
//! slow to copy is linked instead: virtual environments (a folder with
//! `pyvenv.cfg`), `node_modules`, and files above [`LINK_ABOVE`] bytes
//! (data sets, checkpoints). Version control folders, `__pycache__` and
//! leakspy's own traces are left out.

use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Files larger than this are linked, not copied.
const LINK_ABOVE: u64 = 8 * 1024 * 1024;
/// A project with more files to copy than this is not a project folder (a
/// home directory, a whole disk): `fix` stops and says so.
const MAX_FILES: u64 = 50_000;
/// Nor one with more bytes to copy than this.
const MAX_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// Folders never copied.
const SKIP_DIRS: &[&str] = &[".git", ".hg", ".svn", "__pycache__", "leakspy-runs"];

pub(super) struct Scratch {
    dir: tempfile::TempDir,
    /// The user's project folder that `dir` mirrors.
    root: PathBuf,
    pub files: u64,
    pub bytes: u64,
    /// Paths (relative to the root) linked rather than copied.
    pub linked: Vec<PathBuf>,
}

impl Scratch {
    /// Copies `root` into a new temporary folder. `stop` (Ctrl-C) ends the
    /// copy early with an error; what was copied is removed.
    pub fn create(root: &Path, stop: &dyn Fn() -> bool) -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("leakspy-fix-")
            .tempdir()
            .context("cannot make a scratch folder for the fixed copy")?;
        let mut s = Scratch {
            dir,
            root: root.to_path_buf(),
            files: 0,
            bytes: 0,
            linked: Vec::new(),
        };
        let target = s.dir.path().to_path_buf();
        s.copy_dir(root, &target, stop)?;
        Ok(s)
    }

    /// The scratch folder.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Where a path of the user's project lies in the copy (None: outside
    /// the project).
    pub fn map(&self, user: &Path) -> Option<PathBuf> {
        let rest = user.strip_prefix(&self.root).ok()?;
        Some(self.dir().join(rest))
    }

    /// The user's path of a path in the copy (a fixed run names its files
    /// there); any other path as it is.
    pub fn unmap(&self, path: &Path) -> PathBuf {
        match path.strip_prefix(self.dir()) {
            Ok(rest) => self.root.join(rest),
            Err(_) => path.to_path_buf(),
        }
    }

    /// The job's command as it runs in the copy, from `cwd` (the user's
    /// folder it ran in): paths into the project point into the copy, and
    /// relative paths that lead out of the project are made absolute, so
    /// that the copy runs the same program on the same data.
    pub fn command(&self, command: &[String], cwd: &Path) -> Vec<String> {
        command
            .iter()
            .enumerate()
            .map(|(i, arg)| match arg.split_once('=') {
                Some((opt, value)) if i > 0 && opt.starts_with('-') => {
                    format!("{opt}={}", self.map_arg(value, cwd, false))
                }
                _ => self.map_arg(arg, cwd, i == 0),
            })
            .collect()
    }

    /// `PYTHONPATH` for the copy, when the user's has entries in the project.
    pub fn env(&self, cwd: &Path) -> Vec<(OsString, OsString)> {
        let Some(path) = std::env::var_os("PYTHONPATH") else {
            return Vec::new();
        };
        let mapped: Vec<String> = path
            .to_string_lossy()
            .split(':')
            .map(|p| {
                if p.is_empty() {
                    p.to_string()
                } else {
                    self.map_path(p, cwd, true)
                }
            })
            .collect();
        vec![("PYTHONPATH".into(), mapped.join(":").into())]
    }

    fn map_arg(&self, arg: &str, cwd: &Path, program: bool) -> String {
        // A bare program name is looked up on PATH, not in the folder.
        if program && !arg.contains('/') {
            return arg.to_string();
        }
        self.map_path(arg, cwd, false)
    }

    /// An argument that names a path: absolute into the project, into the
    /// copy; relative and existing outside the project, absolute.
    fn map_path(&self, arg: &str, cwd: &Path, always: bool) -> String {
        let p = Path::new(arg);
        if p.is_absolute() {
            return match self.map(&normal(p)) {
                Some(m) => m.display().to_string(),
                None => arg.to_string(),
            };
        }
        let abs = normal(&cwd.join(p));
        if abs.starts_with(&self.root) || !(always || abs.exists()) {
            arg.to_string()
        } else {
            abs.display().to_string()
        }
    }

    fn copy_dir(&mut self, from: &Path, to: &Path, stop: &dyn Fn() -> bool) -> Result<()> {
        let entries =
            std::fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))?;
        let mut entries: Vec<_> = entries.filter_map(std::result::Result::ok).collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            if stop() {
                bail!("interrupted while copying the project");
            }
            let name = entry.file_name();
            let src = entry.path();
            let dst = to.join(&name);
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_symlink() {
                // A link stays a link: relative ones then point into the copy.
                if let Ok(target) = std::fs::read_link(&src) {
                    let _ = std::os::unix::fs::symlink(target, &dst);
                }
            } else if kind.is_dir() {
                if SKIP_DIRS.iter().any(|s| name == *s) {
                    continue;
                }
                if src.join("pyvenv.cfg").is_file() || name == "node_modules" {
                    self.link(&src, &dst)?;
                    continue;
                }
                std::fs::create_dir(&dst)
                    .with_context(|| format!("cannot make {}", dst.display()))?;
                self.copy_dir(&src, &dst, stop)?;
            } else if kind.is_file() {
                let len = entry.metadata().map(|m| m.len()).unwrap_or(0);
                if len > LINK_ABOVE {
                    self.link(&src, &dst)?;
                    continue;
                }
                self.files += 1;
                self.bytes += len;
                if self.files > MAX_FILES || self.bytes > MAX_BYTES {
                    bail!(
                        "{} is too big to copy for the fixed run (more than {MAX_FILES} files or \
                         {} GiB): run `leakspy fix` from the job's own project folder",
                        self.root.display(),
                        MAX_BYTES >> 30
                    );
                }
                std::fs::copy(&src, &dst).with_context(|| {
                    format!("cannot copy {} to the scratch folder", src.display())
                })?;
            }
            // Sockets, pipes and devices are not part of a project.
        }
        Ok(())
    }

    fn link(&mut self, src: &Path, dst: &Path) -> Result<()> {
        std::os::unix::fs::symlink(src, dst)
            .with_context(|| format!("cannot link {} in the scratch folder", src.display()))?;
        if let Ok(rel) = src.strip_prefix(&self.root) {
            self.linked.push(rel.to_path_buf());
        }
        Ok(())
    }
}

/// The project folder to copy: the job's working directory, or the folder
/// that holds it and every file to fix when one lies outside it.
pub(super) fn project_root(cwd: &Path, files: &[PathBuf]) -> PathBuf {
    let mut root = normal(cwd);
    for f in files {
        let f = normal(f);
        while !f.starts_with(&root) {
            match root.parent() {
                Some(p) => root = p.to_path_buf(),
                None => break,
            }
        }
    }
    root
}

/// `a/./b/../c` as `a/c`, without touching the file system (a path that
/// does not exist yet still maps).
fn normal(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_sources_links_environments_and_skips_history() {
        let user = tempfile::tempdir().unwrap();
        let root = user.path();
        std::fs::create_dir_all(root.join("pkg/__pycache__")).unwrap();
        std::fs::create_dir_all(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join("venv/bin")).unwrap();
        std::fs::write(root.join("venv/pyvenv.cfg"), "home = /usr\n").unwrap();
        std::fs::write(root.join("train.py"), "print(1)\n").unwrap();
        std::fs::write(root.join("pkg/m.py"), "x = 1\n").unwrap();
        std::fs::write(root.join("pkg/__pycache__/m.pyc"), "").unwrap();
        std::fs::write(root.join(".git/HEAD"), "ref").unwrap();
        let s = Scratch::create(root, &|| false).unwrap();
        let copy = s.dir().to_path_buf();
        assert_eq!(
            std::fs::read_to_string(copy.join("pkg/m.py")).unwrap(),
            "x = 1\n"
        );
        assert!(!copy.join("pkg/m.py").is_symlink());
        assert!(copy.join("venv").is_symlink());
        assert!(!copy.join(".git").exists());
        assert!(!copy.join("pkg/__pycache__").exists());
        assert_eq!(s.linked, vec![PathBuf::from("venv")]);
        assert_eq!(s.files, 2);
        drop(s);
        assert!(!copy.exists(), "the copy is removed when dropped");
        assert!(
            root.join("venv/pyvenv.cfg").is_file(),
            "links are not followed"
        );
    }

    #[test]
    fn commands_point_into_the_copy() {
        let user = tempfile::tempdir().unwrap();
        let root = user.path().join("proj");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::write(user.path().join("data.csv"), "").unwrap();
        let s = Scratch::create(&root, &|| false).unwrap();
        let cmd = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        let abs_script = root.join("train.py").display().to_string();
        let mapped = s.command(
            &cmd(&[
                "python",
                &abs_script,
                "--data=../data.csv",
                "rel.py",
                "--out",
                "/elsewhere/x",
            ]),
            &root,
        );
        assert_eq!(mapped[0], "python");
        assert_eq!(mapped[1], s.dir().join("train.py").display().to_string());
        assert_eq!(
            mapped[2],
            format!("--data={}", user.path().join("data.csv").display())
        );
        assert_eq!(mapped[3], "rel.py");
        assert_eq!(mapped[5], "/elsewhere/x");
        // A program given by a relative path out of the project.
        std::fs::create_dir_all(user.path().join("venv/bin")).unwrap();
        std::fs::write(user.path().join("venv/bin/python"), "").unwrap();
        let venv_py = cmd(&["../venv/bin/python", "t.py"]);
        assert_eq!(
            s.command(&venv_py, &root)[0],
            user.path().join("venv/bin/python").display().to_string()
        );
    }

    #[test]
    fn the_root_holds_the_job_folder_and_every_file() {
        let cwd = Path::new("/w/proj/runs");
        assert_eq!(project_root(cwd, &[]), PathBuf::from("/w/proj/runs"));
        assert_eq!(
            project_root(cwd, &[PathBuf::from("/w/proj/runs/../train.py")]),
            PathBuf::from("/w/proj")
        );
    }
}
