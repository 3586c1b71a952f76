//! What a process has mapped (/proc/PID/maps), the files behind the
//! mappings, and the run-time addresses of their exported symbols.

use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use object::read::elf::ElfFile64;
use object::{Endianness, Object, ObjectSegment, ObjectSymbol};

/// One file mapped at file offset 0: where the object was loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedFile {
    /// The path as the process sees it (its mount namespace).
    pub path: String,
    /// Start of the mapping of file offset 0.
    pub start: u64,
    /// Start and end of that mapping, as written in maps (for map_files).
    pub range: (u64, u64),
    pub inode: u64,
    /// The file was replaced or removed after the process mapped it.
    pub deleted: bool,
}

/// The files mapped at offset 0, in address order (the executable, then
/// shared libraries in load order).
pub fn mapped_files(pid: u32) -> std::io::Result<Vec<MappedFile>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/maps"))?;
    Ok(parse_maps(&text))
}

pub fn parse_maps(text: &str) -> Vec<MappedFile> {
    let mut out: Vec<MappedFile> = Vec::new();
    for line in text.lines() {
        // start-end perms offset dev inode path (the path may hold spaces)
        let mut it = line.splitn(6, ' ');
        let (Some(range), Some(_perms), Some(offset), Some(_dev), Some(inode)) =
            (it.next(), it.next(), it.next(), it.next(), it.next())
        else {
            continue;
        };
        let path = it.next().unwrap_or("").trim_start();
        if !path.starts_with('/') || !offset.trim_start_matches('0').is_empty() {
            continue;
        }
        let Some((a, b)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end), Ok(inode)) = (
            u64::from_str_radix(a, 16),
            u64::from_str_radix(b, 16),
            inode.parse::<u64>(),
        ) else {
            continue;
        };
        let (path, deleted) = match path.strip_suffix(" (deleted)") {
            Some(p) => (p, true),
            None => (path, false),
        };
        // A file mapped twice at offset 0 (rare): the first mapping is the load.
        if out.iter().any(|m| m.path == path) {
            continue;
        }
        out.push(MappedFile {
            path: path.to_string(),
            start,
            range: (start, end),
            inode,
            deleted,
        });
    }
    out
}

/// The file name of a mapping (`libpython3.11.so.1.0`).
pub fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// `(3, 11)` from `libpython3.11.so.1.0`, `libpython3.13t.so`, `python3.12`.
pub fn python_version_in_name(name: &str) -> Option<(u32, u32)> {
    let rest = name
        .strip_prefix("libpython")
        .or_else(|| name.strip_prefix("python"))?;
    let (major, rest) = rest.split_once('.')?;
    let minor: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some((major.parse().ok()?, minor.parse().ok()?))
}

/// The bytes of a mapped file, opened so that it is the very file the
/// process mapped (same inode): through the process's root for another
/// mount namespace, or through map_files for a deleted one.
pub fn read_mapped(pid: u32, m: &MappedFile) -> Result<Vec<u8>, String> {
    let candidates = [
        PathBuf::from(&m.path),
        PathBuf::from(format!("/proc/{pid}/root{}", m.path)),
        PathBuf::from(format!(
            "/proc/{pid}/map_files/{:x}-{:x}",
            m.range.0, m.range.1
        )),
    ];
    for c in &candidates {
        let Ok(meta) = std::fs::metadata(c) else {
            continue;
        };
        if meta.ino() != m.inode {
            continue;
        }
        if let Ok(bytes) = std::fs::read(c) {
            return Ok(bytes);
        }
    }
    Err(if m.deleted {
        format!(
            "{} was replaced on disk after the process loaded it (an upgrade?)",
            m.path
        )
    } else {
        format!("cannot read {} as the process mapped it", m.path)
    })
}

/// Exported (dynamic) symbols of an ELF object, looked up by name.
pub struct Symbols {
    /// Run-time address minus link-time address.
    bias: u64,
    found: Vec<(String, u64)>,
}

impl Symbols {
    /// Reads the dynamic symbols named in `wanted` from `m`, a 64-bit ELF
    /// object mapped at `m.start`.
    pub fn load(pid: u32, m: &MappedFile, wanted: &[&str]) -> Result<Symbols, String> {
        let data = read_mapped(pid, m)?;
        Self::parse(&data, m.start, wanted).map_err(|e| format!("{}: {e}", m.path))
    }

    pub fn parse(data: &[u8], start: u64, wanted: &[&str]) -> Result<Symbols, String> {
        let elf = ElfFile64::<Endianness>::parse(data)
            .map_err(|e| format!("not a 64-bit ELF object ({e})"))?;
        // The segment holding file offset 0 is the one mapped at `start`.
        let first = elf
            .segments()
            .find(|s| s.file_range().0 == 0)
            .map(|s| s.address())
            .ok_or("no loadable segment at file offset 0")?;
        let bias = start.wrapping_sub(first & !0xfff);
        let mut found = Vec::new();
        for sym in elf.dynamic_symbols() {
            if sym.is_undefined() || sym.address() == 0 {
                continue;
            }
            if let Ok(name) = sym.name() {
                if wanted.contains(&name) && !found.iter().any(|(n, _)| n == name) {
                    found.push((name.to_string(), sym.address()));
                }
            }
        }
        Ok(Symbols { bias, found })
    }

    /// The run-time address of `name`.
    pub fn address(&self, name: &str) -> Option<u64> {
        self.found
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, a)| a.wrapping_add(self.bias))
    }
}

/// `Py_Version` (CPython 3.11+ exports it: 0x030B07F0 for 3.11.7), read from
/// the file itself, for a statically linked interpreter whose name says no
/// version.
pub fn py_version_constant(data: &[u8]) -> Option<(u32, u32)> {
    let elf = ElfFile64::<Endianness>::parse(data).ok()?;
    let sym = elf
        .dynamic_symbols()
        .find(|s| s.name() == Ok("Py_Version") && !s.is_undefined())?;
    let addr = sym.address();
    for seg in elf.segments() {
        let (off, size) = seg.file_range();
        if addr >= seg.address() && addr + 4 <= seg.address() + size {
            let at = usize::try_from(off + (addr - seg.address())).ok()?;
            let bytes: [u8; 4] = data.get(at..at + 4)?.try_into().ok()?;
            let v = u32::from_le_bytes(bytes);
            return Some((v >> 24, (v >> 16) & 0xff));
        }
    }
    None
}

/// Whether `path` names the C library (glibc or musl).
pub fn is_libc(path: &str) -> bool {
    let name = file_name(path);
    name.starts_with("libc.so") || name.starts_with("libc-2.") || name.starts_with("ld-musl")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_give_objects_at_offset_zero() {
        let text = "\
55d0c8a00000-55d0c8a01000 r--p 00000000 08:01 1234 /usr/bin/python3.11
55d0c8a01000-55d0c8c00000 r-xp 00001000 08:01 1234 /usr/bin/python3.11
7f0000000000-7f0000100000 r--p 00000000 08:01 99 /opt/my libs/libpython3.11.so.1.0 (deleted)
7f0000200000-7f0000300000 rw-p 00000000 00:00 0 
7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0                          [stack]
";
        let m = parse_maps(text);
        assert_eq!(m.len(), 2, "{m:?}");
        assert_eq!(m[0].path, "/usr/bin/python3.11");
        assert_eq!(m[0].start, 0x55d0c8a00000);
        assert_eq!(m[1].path, "/opt/my libs/libpython3.11.so.1.0");
        assert!(m[1].deleted);
        assert_eq!(m[1].inode, 99);
    }

    #[test]
    fn versions_from_file_names() {
        assert_eq!(
            python_version_in_name("libpython3.11.so.1.0"),
            Some((3, 11))
        );
        assert_eq!(
            python_version_in_name("libpython3.13t.so.1.0"),
            Some((3, 13))
        );
        assert_eq!(python_version_in_name("python3.8"), Some((3, 8)));
        assert_eq!(python_version_in_name("python3"), None);
        assert_eq!(python_version_in_name("bash"), None);
    }

    #[test]
    fn own_libc_symbols_resolve_to_their_real_addresses() {
        // This test process maps libc: the address found through the file
        // must be the address the dynamic linker gave `getpid`.
        let me = std::process::id();
        let files = mapped_files(me).unwrap();
        let Some(libc) = files.iter().find(|m| is_libc(&m.path)) else {
            return; // statically linked test binary
        };
        let syms = Symbols::load(me, libc, &["getpid", "mmap"]).unwrap();
        assert_eq!(
            syms.address("getpid"),
            Some(libc::getpid as *const () as usize as u64)
        );
        assert!(syms.address("mmap").is_some());
        assert!(syms.address("no_such_symbol").is_none());
    }
}
