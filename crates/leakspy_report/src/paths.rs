//! Source paths as the reader should see them: relative to the job's own
//! working directory (the trace header's `cwd`: for `run` the folder it was
//! started in, for `attach` the job's `/proc/PID/cwd`) when the file is
//! under it, else absolute. Never relative to where leakspy happens to run.

use std::path::{Path, PathBuf};

use crate::census::GrowthGroup;

/// `file` as shown: relative to `cwd` when under it, else as the job named it.
pub(crate) fn shown(file: &str, cwd: &str) -> String {
    if cwd.is_empty() {
        return file.to_string();
    }
    match Path::new(file).strip_prefix(cwd) {
        Ok(rest) if !rest.as_os_str().is_empty() => rest.display().to_string(),
        _ => file.to_string(),
    }
}

/// Where leakspy reads `file` (as shown) from: a relative path is the job's,
/// relative to its working directory.
pub fn resolve(file: &str, cwd: &str) -> PathBuf {
    let p = Path::new(file);
    if p.is_absolute() || cwd.is_empty() {
        p.to_path_buf()
    } else {
        Path::new(cwd).join(p)
    }
}

/// The groups' holder and creation-site files, as shown.
pub(crate) fn show_relative_to(groups: &mut [GrowthGroup], cwd: &str) {
    for g in groups {
        let (holder, also) = match g.holder.as_mut() {
            Some(h) => (
                h.file.as_mut(),
                h.also.iter_mut().filter_map(|a| a.file.as_mut()).collect(),
            ),
            None => (None, Vec::new()),
        };
        let created = g.created_at.as_mut().map(|c| &mut c.file);
        for file in holder.into_iter().chain(also).chain(created) {
            *file = shown(file, cwd);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_to_the_job_or_absolute() {
        let cwd = "/tmp/x/work";
        assert_eq!(shown("/tmp/x/work/leaky_mlp.py", cwd), "leaky_mlp.py");
        assert_eq!(shown("/tmp/x/work/src/m.py", cwd), "src/m.py");
        // Outside the job's folder, and a folder that only starts alike.
        assert_eq!(shown("/tmp/x/other.py", cwd), "/tmp/x/other.py");
        assert_eq!(shown("/tmp/x/work2/a.py", cwd), "/tmp/x/work2/a.py");
        assert_eq!(shown("rel/a.py", cwd), "rel/a.py");
        assert_eq!(shown("/a/b.py", ""), "/a/b.py");
        assert_eq!(
            resolve("rel/a.py", cwd),
            PathBuf::from("/tmp/x/work/rel/a.py")
        );
        assert_eq!(resolve("/a/b.py", cwd), PathBuf::from("/a/b.py"));
    }
}
