//! The probe put in through gdb (architectures other than x86-64, or
//! `--inject-with gdb`): the same `mmap` and `Py_AddPendingCall` calls as
//! `ptrace.rs`, made by gdb in batch mode with a command file, which stops
//! at the first error.
//!
//! gdb 13 and older cannot write the vector registers back on CPUs with
//! AMX (`Couldn't write extended state status`), and a call it fails to
//! undo makes the job's interrupted system call fail (a Python job dies of
//! `OSError: [Errno 514]`). So the file first changes one vector register
//! and puts it back: if gdb cannot, it stops there, with nothing changed.

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::maps::{file_name, MappedFile};
use super::InjectError;

/// Printed by gdb right before the result of `Py_AddPendingCall`.
const MARK: &str = "LEAKSPY-PENDING-CALL";

/// A C string literal for gdb's expression parser.
fn c_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A regular expression that matches `name` literally (for `sharedlibrary`).
fn literal_regex(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c.to_string()
            } else {
                format!("\\{c}")
            }
        })
        .collect()
}

pub fn commands(library: &MappedFile, statement: &str) -> String {
    let text = (statement.len() + 1).div_ceil(4096) * 4096;
    let precheck = if cfg!(target_arch = "x86_64") {
        "set $leakspy_v = $xmm15.v2_int64[0]\n\
         set $xmm15.v2_int64[0] = $leakspy_v ^ 1\n\
         set $xmm15.v2_int64[0] = $leakspy_v\n"
    } else {
        ""
    };
    format!(
        "set confirm off
set pagination off
set width 0
set unwindonsignal on
sharedlibrary {lib}
sharedlibrary libc\\.
{precheck}set $leakspy_page = ((void *(*)(void *, unsigned long, int, int, int, long)) mmap)(0, {text}, 3, 34, -1, 0)
set {{char[{n}]}} $leakspy_page = {literal}
echo {MARK}\\n
print ((int (*)(void *, void *)) Py_AddPendingCall)((void *) PyRun_SimpleString, $leakspy_page)
",
        lib = literal_regex(file_name(&library.path)),
        n = statement.len() + 1,
        literal = c_str(statement),
    )
}

fn find_gdb() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("gdb"))
        .find(|p| p.is_file())
}

pub fn inject(
    pid: u32,
    library: &MappedFile,
    statement: &str,
    timeout: Duration,
) -> Result<(), InjectError> {
    let version = super::maps::python_version_in_name(file_name(&library.path))
        .map(|(a, b)| format!("{a}.{b}"))
        .unwrap_or_else(|| "3".into());
    let gdb = find_gdb().ok_or(InjectError::GdbMissing(version))?;
    let dir = tempfile::Builder::new().prefix("leakspy-gdb-").tempdir()?;
    let script = dir.path().join("inject.gdb");
    std::fs::write(&script, commands(library, statement))?;
    let mut child = Command::new(gdb)
        .args(["-nx", "-batch", "-q"])
        .args([
            "-iex",
            "set auto-load off",
            "-iex",
            "set auto-solib-add off",
        ])
        .arg("-p")
        .arg(pid.to_string())
        .arg("-x")
        .arg(&script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| InjectError::Gdb(format!("cannot start gdb: {e}")))?;
    // Both pipes are read on threads so that gdb never blocks on a full one.
    let read = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut r) = r {
                let _ = r.read_to_string(&mut s);
            }
            s
        })
    };
    let out = read(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let err = read(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let deadline = Instant::now() + timeout;
    let mut timed_out = false;
    loop {
        if child.try_wait()?.is_some() {
            break;
        }
        if Instant::now() >= deadline && !timed_out {
            // SIGINT makes gdb abandon a call it is in (unwindonsignal puts
            // the frame back) and detach; then SIGTERM, which detaches too.
            timed_out = true;
            // SAFETY: kill(2) on our own child, not yet reaped.
            unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
            let grace = Instant::now() + Duration::from_secs(5);
            while child.try_wait()?.is_none() && Instant::now() < grace {
                std::thread::sleep(Duration::from_millis(20));
            }
            if child.try_wait()?.is_none() {
                // SAFETY: as above.
                unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            }
            let _ = child.wait();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    if timed_out {
        return Err(InjectError::Timeout {
            what: "gdb",
            secs: timeout.as_secs(),
        });
    }
    judge(&stdout, &stderr)
}

/// What gdb's output says about the injection.
pub fn judge(stdout: &str, stderr: &str) -> Result<(), InjectError> {
    if let Some(after) = stdout.split(MARK).nth(1) {
        let result = after.lines().find_map(|l| {
            l.trim()
                .strip_prefix('$')?
                .split_once(" = ")
                .map(|(_, v)| v.trim())
        });
        return match result {
            Some("0") => Ok(()),
            Some(_) => Err(InjectError::Failed(
                "the interpreter's queue of pending calls is full; try again".into(),
            )),
            None => Err(InjectError::Gdb(format!(
                "gdb could not call Py_AddPendingCall: {}",
                last_error(stderr)
            ))),
        };
    }
    let all = format!("{stdout}\n{stderr}");
    if all.contains("ptrace: Operation not permitted") {
        return Err(InjectError::NotPermitted(
            "gdb: ptrace: Operation not permitted".into(),
        ));
    }
    if all.contains("Couldn't write extended state status") {
        return Err(InjectError::Gdb(
            "this gdb cannot restore the vector registers on this CPU (gdb 13 and older with \
             AMX: \"Couldn't write extended state status\"), so it was not let call anything; \
             upgrade gdb to 14 or later"
                .into(),
        ));
    }
    if all.contains("No symbol \"Py_AddPendingCall\"")
        || all.contains("No symbol table is loaded")
        || all.contains("No symbol \"mmap\"")
    {
        return Err(InjectError::Gdb(format!(
            "gdb found no symbols to call ({})",
            last_error(stderr)
        )));
    }
    Err(InjectError::Gdb(format!(
        "gdb failed: {}",
        last_error(stderr)
    )))
}

/// The last meaningful line gdb wrote to stderr.
fn last_error(stderr: &str) -> String {
    stderr
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| {
            !l.is_empty()
                && !l.starts_with("warning:")
                && !l.starts_with('[')
                && !l.contains("auto-load")
        })
        .unwrap_or("no message")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lib() -> MappedFile {
        MappedFile {
            path: "/usr/lib/libpython3.11.so.1.0".into(),
            start: 0,
            range: (0, 0),
            inode: 1,
            deleted: false,
        }
    }

    #[test]
    fn the_command_file_checks_registers_before_any_call() {
        let statement = "try:\n x(\"a\\b\")\nexcept BaseException:\n pass\n";
        let c = commands(&lib(), statement);
        let first_call = c.find("mmap)").unwrap();
        if cfg!(target_arch = "x86_64") {
            assert!(c.find("$xmm15").unwrap() < first_call, "{c}");
        }
        assert!(
            c.contains("sharedlibrary libpython3\\.11\\.so\\.1\\.0\n"),
            "{c}"
        );
        assert!(
            c.contains(r#"= "try:\n x(\"a\\b\")\nexcept BaseException:\n pass\n""#),
            "{c}"
        );
        let n = statement.len() + 1;
        assert!(
            c.contains(&format!("set {{char[{n}]}} $leakspy_page")),
            "{c}"
        );
    }

    #[test]
    fn gdb_output_is_judged() {
        assert!(judge(&format!("{MARK}\n$1 = 0\n"), "").is_ok());
        assert!(matches!(
            judge(&format!("{MARK}\n$2 = -1\n"), ""),
            Err(InjectError::Failed(_))
        ));
        let amx = judge(
            "",
            "/tmp/x/inject.gdb:7: Error in sourced command file:\nCouldn't write extended state status: Bad address.\n",
        )
        .unwrap_err()
        .to_string();
        assert!(amx.contains("upgrade gdb"), "{amx}");
        assert!(matches!(
            judge("", "ptrace: Operation not permitted.\n"),
            Err(InjectError::NotPermitted(_))
        ));
    }
}
