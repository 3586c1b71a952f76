//! cgroup memory of the child: limit, usage and the OOM-kill counter. cgroup
//! v2 (`memory.max`, `memory.current`, `memory.events`) first; v1
//! (`memory.limit_in_bytes`, `memory.usage_in_bytes`, `memory.oom_control`)
//! on hybrid hosts, where it is the only memory controller.

use std::path::{Path, PathBuf};

use leakspy_trace::CgroupSample;

/// v1 reports "no limit" as a huge page-aligned number near i64::MAX.
const NO_LIMIT_ABOVE: u64 = 1 << 60;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

#[derive(Debug, Clone)]
pub struct CgroupSampler {
    dir: PathBuf,
    version: Version,
}

impl CgroupSampler {
    /// The memory cgroup of `pid`, or `None` when it cannot be found or read.
    pub fn for_pid(pid: u32) -> Option<Self> {
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
        Self::locate(&text, Path::new("/sys/fs/cgroup"))
    }

    /// Finds the memory cgroup directory from the text of /proc/PID/cgroup.
    fn locate(proc_cgroup: &str, root: &Path) -> Option<Self> {
        let mut v1 = None;
        let mut v2 = None;
        for line in proc_cgroup.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(id), Some(controllers), Some(path)) =
                (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let rel = path.trim_start_matches('/');
            if id == "0" && controllers.is_empty() {
                v2 = Some(rel.to_string());
            } else if controllers.split(',').any(|c| c == "memory") {
                v1 = Some(rel.to_string());
            }
        }
        if let Some(rel) = v2 {
            for dir in candidates(root, &rel) {
                if dir.join("memory.current").exists() {
                    return Some(CgroupSampler {
                        dir,
                        version: Version::V2,
                    });
                }
            }
        }
        if let Some(rel) = v1 {
            for dir in candidates(&root.join("memory"), &rel) {
                if dir.join("memory.usage_in_bytes").exists() {
                    return Some(CgroupSampler {
                        dir,
                        version: Version::V1,
                    });
                }
            }
        }
        None
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn sample(&self) -> Option<CgroupSample> {
        match self.version {
            Version::V2 => {
                let usage = read_u64(&self.dir.join("memory.current"))?;
                let limit = std::fs::read_to_string(self.dir.join("memory.max"))
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok());
                let oom_kill = read_key(&self.dir.join("memory.events"), "oom_kill").unwrap_or(0);
                Some(CgroupSample {
                    limit,
                    usage,
                    oom_kill,
                })
            }
            Version::V1 => {
                let usage = read_u64(&self.dir.join("memory.usage_in_bytes"))?;
                let limit = read_u64(&self.dir.join("memory.limit_in_bytes"))
                    .filter(|&l| l < NO_LIMIT_ABOVE);
                let oom_kill =
                    read_key(&self.dir.join("memory.oom_control"), "oom_kill").unwrap_or(0);
                Some(CgroupSample {
                    limit,
                    usage,
                    oom_kill,
                })
            }
        }
    }
}

/// Where the cgroup `rel` may be mounted: inside a container the path printed
/// in /proc/PID/cgroup can start with components of the host's hierarchy
/// that the container's mount does not show, so shorter and shorter suffixes
/// of it are tried, down to the mount's root.
fn candidates(mount: &Path, rel: &str) -> Vec<PathBuf> {
    let parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    (0..=parts.len())
        .map(|skip| {
            parts[skip..]
                .iter()
                .fold(mount.to_path_buf(), |d, p| d.join(p))
        })
        .collect()
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// The value of `key` in a "key value" per line file (memory.events, memory.oom_control).
fn read_key(path: &Path, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(path).ok()?;
    parse_key(&text, key)
}

fn parse_key(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_memory_events() {
        let text = "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n";
        assert_eq!(parse_key(text, "oom_kill"), Some(2));
        assert_eq!(parse_key(text, "oom"), Some(3));
        assert_eq!(parse_key(text, "nothing"), None);
    }

    #[test]
    fn locates_v2_and_v1_directories() {
        let root = tempfile::tempdir().unwrap();
        let v2 = root.path().join("user.slice/job");
        std::fs::create_dir_all(&v2).unwrap();
        std::fs::write(v2.join("memory.current"), "1000\n").unwrap();
        std::fs::write(v2.join("memory.max"), "max\n").unwrap();
        std::fs::write(v2.join("memory.events"), "oom 1\noom_kill 1\n").unwrap();
        let s = CgroupSampler::locate("0::/user.slice/job\n", root.path()).unwrap();
        assert_eq!(
            s.sample(),
            Some(CgroupSample {
                limit: None,
                usage: 1000,
                oom_kill: 1
            })
        );

        let root = tempfile::tempdir().unwrap();
        let v1 = root.path().join("memory");
        std::fs::create_dir_all(&v1).unwrap();
        std::fs::write(v1.join("memory.usage_in_bytes"), "2000\n").unwrap();
        std::fs::write(v1.join("memory.limit_in_bytes"), "9223372036854771712\n").unwrap();
        std::fs::write(
            v1.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 4\n",
        )
        .unwrap();
        // The printed path does not exist under the mount (cgroup namespace): the mount root is used.
        let s = CgroupSampler::locate("4:memory:/elsewhere/abc\n0::/\n", root.path()).unwrap();
        assert_eq!(
            s.sample(),
            Some(CgroupSample {
                limit: None,
                usage: 2000,
                oom_kill: 4
            })
        );
        std::fs::write(v1.join("memory.limit_in_bytes"), "4096\n").unwrap();
        assert_eq!(s.sample().unwrap().limit, Some(4096));
    }

    #[test]
    fn host_prefixes_of_the_path_are_dropped() {
        let c = candidates(Path::new("/m"), "/host/abc/job");
        let c: Vec<String> = c.iter().map(|p| p.display().to_string()).collect();
        assert_eq!(c, ["/m/host/abc/job", "/m/abc/job", "/m/job", "/m"]);
    }

    #[test]
    fn nothing_readable_is_none() {
        let root = tempfile::tempdir().unwrap();
        assert!(CgroupSampler::locate("0::/x\n", root.path()).is_none());
    }
}
