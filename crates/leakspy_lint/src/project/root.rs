//! The project a checked path belongs to, and the dotted module name of each of its files.
//!
//! The root is the nearest folder at or above the path that marks a project
//! (`pyproject.toml`, `setup.cfg`, `setup.py`, or a git work tree's top), never looking past an
//! installed package (a folder in `site-packages`) or a virtual environment; without a marker,
//! the folder given (a file's own folder). So `check one/file.py` inside a project indexes the
//! same files as `check .` at its root, and a tree of sources without markers is its own root.

use std::path::{Path, PathBuf};

const MARKERS: &[&str] = &["pyproject.toml", "setup.cfg", "setup.py", ".git"];

/// The project root of `path` (a file or a folder), absolute when the path exists.
pub fn find_root(path: &Path) -> PathBuf {
    let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let start = if abs.is_dir() {
        abs.clone()
    } else {
        abs.parent().map(Path::to_path_buf).unwrap_or_default()
    };
    let mut dir = Some(start.as_path());
    while let Some(d) = dir {
        if MARKERS.iter().any(|m| d.join(m).exists()) {
            return d.to_path_buf();
        }
        // An installed package, or a virtual environment, is not part of a project above it.
        let parent = d.parent();
        let installed = parent
            .and_then(Path::file_name)
            .is_some_and(|n| n == "site-packages" || n == "dist-packages");
        if installed || d.join("pyvenv.cfg").is_file() {
            break;
        }
        dir = parent;
    }
    // No marker: the outermost package around the path (`torch/nn/functional.py` is checked as
    // part of `torch`), else the folder itself.
    let mut root = start;
    while root.join("__init__.py").is_file()
        && root
            .parent()
            .is_some_and(|p| p.join("__init__.py").is_file())
    {
        root = root.parent().map(Path::to_path_buf).unwrap_or_default();
    }
    root
}

/// The dotted name Python imports `file` by from the project at `root` (`pkg/sub/mod.py` ->
/// `pkg.sub.mod`, `pkg/__init__.py` -> `pkg`), with the packages that contain the root
/// itself (folders holding an `__init__.py` above it: checking `site-packages/torch` names
/// `torch/nn/functional.py` `torch.nn.functional`). `None` for a file outside the root, or a
/// notebook (nothing imports one).
pub fn module_name(root: &Path, file: &Path) -> Option<String> {
    if file.extension().is_some_and(|e| e == "ipynb") {
        return None;
    }
    let rel = file.strip_prefix(root).ok()?;
    let mut parts: Vec<String> = Vec::new();
    let mut above = root;
    while above.join("__init__.py").is_file() {
        let Some(name) = above.file_name() else { break };
        parts.insert(0, name.to_string_lossy().into_owned());
        match above.parent() {
            Some(p) => above = p,
            None => break,
        }
    }
    relative_module_name(parts, rel)
}

/// The dotted name of the file at `rel` (relative to a root with no package around it): the
/// module name without looking at the file system.
pub fn module_name_from_path(rel: &Path) -> Option<String> {
    if rel.extension().is_some_and(|e| e == "ipynb") {
        return None;
    }
    relative_module_name(Vec::new(), rel)
}

fn relative_module_name(mut parts: Vec<String>, rel: &Path) -> Option<String> {
    for c in rel.components() {
        parts.push(c.as_os_str().to_string_lossy().into_owned());
    }
    let last = parts.pop()?;
    let stem = last
        .strip_suffix(".py")
        .or_else(|| last.strip_suffix(".pyi"))
        .unwrap_or(&last);
    if stem != "__init__" {
        parts.push(stem.to_string());
    }
    (!parts.is_empty()).then(|| parts.join("."))
}

/// Is `file` a package's `__init__` (its module name is the package's)?
pub fn is_package_init(file: &Path) -> bool {
    file.file_stem().is_some_and(|s| s == "__init__")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_and_module_names() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("proj");
        std::fs::create_dir_all(root.join("src/pkg/sub")).unwrap();
        std::fs::create_dir_all(root.join("scripts")).unwrap();
        std::fs::write(root.join("pyproject.toml"), "").unwrap();
        std::fs::write(root.join("src/pkg/__init__.py"), "").unwrap();
        std::fs::write(root.join("src/pkg/sub/__init__.py"), "").unwrap();
        std::fs::write(root.join("src/pkg/sub/mod.py"), "").unwrap();
        std::fs::write(root.join("scripts/train.py"), "").unwrap();
        let root = std::fs::canonicalize(&root).unwrap();
        assert_eq!(find_root(&root.join("scripts/train.py")), root);
        assert_eq!(find_root(&root.join("src/pkg")), root);
        assert_eq!(
            module_name(&root, &root.join("src/pkg/sub/mod.py")).as_deref(),
            Some("src.pkg.sub.mod")
        );
        assert_eq!(
            module_name(&root, &root.join("src/pkg/__init__.py")).as_deref(),
            Some("src.pkg")
        );
        // A tree without markers is its own root; a package root names its modules from the
        // package.
        let bare = dir.path().join("bare/torch");
        std::fs::create_dir_all(bare.join("nn")).unwrap();
        std::fs::write(bare.join("__init__.py"), "").unwrap();
        std::fs::write(bare.join("nn/functional.py"), "").unwrap();
        let bare = std::fs::canonicalize(&bare).unwrap();
        std::fs::write(bare.join("nn/__init__.py"), "").unwrap();
        assert_eq!(find_root(&bare.join("nn/functional.py")), bare);
        assert_eq!(find_root(&bare), bare);
        assert_eq!(
            module_name(&bare, &bare.join("nn/functional.py")).as_deref(),
            Some("torch.nn.functional")
        );
        assert_eq!(module_name(&bare, &bare.join("x.ipynb")), None);
    }
}
