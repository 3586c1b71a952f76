//! The probe put in with ptrace on x86-64 Linux, without gdb.
//!
//! Only the job's main thread is stopped, for a few milliseconds; its other
//! threads run on. Stopped, it is made to call two functions, each returning
//! to address 0 so that the return faults and ptrace reports it:
//!
//! 1. `mmap` for one private page, which gets the loader's text (it must
//!    outlive the call: the interpreter reads it later);
//! 2. `Py_AddPendingCall(PyRun_SimpleString, page)`, which only queues the
//!    call under a lock, needs neither the GIL nor a thread state, and is
//!    what signal handlers use.
//!
//! Then every register is put back (the general ones and the whole XSAVE
//! area, at the size the kernel says: gdb 13 writes a fixed size that
//! kernels with AMX refuse, and a job it fails on loses the syscall it was
//! in), the fault is discarded and the thread resumes where it was. An
//! interrupted system call restarts exactly as after any signal.
//!
//! The page stays mapped for the life of the job (4 KiB per attach).

use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

use libc::{c_long, c_void, pid_t, user_regs_struct};

use super::maps::{is_libc, mapped_files, MappedFile, Symbols};
use super::InjectError;

const PTRACE_POKEDATA: u32 = 5;
const PTRACE_CONT: u32 = 7;
const PTRACE_GETREGS: u32 = 12;
const PTRACE_SETREGS: u32 = 13;
const PTRACE_GETFPREGS: u32 = 14;
const PTRACE_SETFPREGS: u32 = 15;
const PTRACE_DETACH: u32 = 17;
const PTRACE_GETREGSET: u32 = 0x4204;
const PTRACE_SETREGSET: u32 = 0x4205;
const PTRACE_SEIZE: u32 = 0x4206;
const PTRACE_INTERRUPT: u32 = 0x4207;
const PTRACE_EVENT_STOP: i32 = 128;
const NT_X86_XSTATE: usize = 0x202;
/// Larger than any XSAVE area (AMX makes it about 11 KiB).
const XSTATE_MAX: usize = 64 * 1024;
/// Below the stack pointer: the red zone (128 bytes) a leaf function may
/// use without moving it, and some margin.
const STACK_GAP: u64 = 512;
/// A stop takes microseconds; a call, milliseconds.
const STOP_TIMEOUT: Duration = Duration::from_secs(5);
const CALL_TIMEOUT: Duration = Duration::from_secs(2);

const PROT_READ_WRITE: u64 = (libc::PROT_READ | libc::PROT_WRITE) as u64;
const MAP_PRIVATE_ANON: u64 = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;

/// Run-time addresses of what the injection calls.
struct Functions {
    mmap: u64,
    add_pending_call: u64,
    run_simple_string: u64,
}

fn resolve(pid: u32, python: &MappedFile) -> Result<Functions, InjectError> {
    let py = Symbols::load(
        pid,
        python,
        &["Py_AddPendingCall", "PyRun_SimpleString", "mmap"],
    )
    .map_err(InjectError::Failed)?;
    let missing = |name: &str| {
        InjectError::Failed(format!(
            "{} does not export {name} (an interpreter built without its C API symbols)",
            python.path
        ))
    };
    let add_pending_call = py
        .address("Py_AddPendingCall")
        .ok_or_else(|| missing("Py_AddPendingCall"))?;
    let run_simple_string = py
        .address("PyRun_SimpleString")
        .ok_or_else(|| missing("PyRun_SimpleString"))?;
    // mmap from the C library (or from a fully static interpreter).
    let mmap = match py.address("mmap") {
        Some(a) => a,
        None => {
            let files = mapped_files(pid).map_err(|e| InjectError::Failed(e.to_string()))?;
            let libc = files.iter().find(|m| is_libc(&m.path)).ok_or_else(|| {
                InjectError::Failed("the process maps no C library to call mmap from".into())
            })?;
            Symbols::load(pid, libc, &["mmap"])
                .map_err(InjectError::Failed)?
                .address("mmap")
                .ok_or_else(|| InjectError::Failed(format!("{} exports no mmap", libc.path)))?
        }
    };
    Ok(Functions {
        mmap,
        add_pending_call,
        run_simple_string,
    })
}

pub fn inject(pid: u32, python: &MappedFile, statement: &str) -> Result<(), InjectError> {
    let f = resolve(pid, python)?;
    let mut text = statement.as_bytes().to_vec();
    text.push(0);
    let len = (text.len() as u64).div_ceil(4096) * 4096;

    let mut t = Tracee::seize(pid)?;
    t.stop()?;
    t.save()?;
    let page = t.call(
        f.mmap,
        &[0, len, PROT_READ_WRITE, MAP_PRIVATE_ANON, u64::MAX, 0],
    )?;
    if page == 0 || page > u64::MAX - 4096 {
        return Err(InjectError::Failed(format!(
            "mmap in the process failed (errno {})",
            page.wrapping_neg()
        )));
    }
    t.write(page, &text)?;
    let rc = t.call(f.add_pending_call, &[f.run_simple_string, page])? as u32 as i32;
    if rc != 0 {
        return Err(InjectError::Failed(
            "the interpreter's queue of pending calls is full; try again".into(),
        ));
    }
    t.finish()
}

/// The registers of the stopped thread, to put back.
struct Saved {
    regs: user_regs_struct,
    fp: Fp,
}

enum Fp {
    /// The whole XSAVE area, at the kernel's size.
    Xstate(Vec<u8>),
    /// Without XSAVE: the legacy FXSAVE area.
    Fx(Box<libc::user_fpregs_struct>),
}

/// The traced main thread. Dropping it restores the registers (if they were
/// saved) and detaches, whatever failed in between.
struct Tracee {
    pid: pid_t,
    saved: Option<Saved>,
    /// Registers were changed and not yet restored.
    dirty: bool,
    detached: bool,
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// ptrace(2), returning the OS error on failure.
fn pt(req: u32, pid: pid_t, addr: usize, data: usize) -> Result<c_long, std::io::Error> {
    // SAFETY: every request made here passes either plain integers or
    // pointers to live buffers of the size the request expects.
    let rc = unsafe { libc::ptrace(req as _, pid, addr as *mut c_void, data as *mut c_void) };
    if rc == -1 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// How a wait ended.
enum Stop {
    /// `PTRACE_EVENT_STOP` (our interrupt, or a group stop: the signal).
    Event(i32),
    /// Signal-delivery stop.
    Signal(i32),
    Ended,
}

impl Tracee {
    fn seize(pid: u32) -> Result<Tracee, InjectError> {
        let pid = pid as pid_t;
        match pt(PTRACE_SEIZE, pid, 0, 0) {
            Ok(_) => Ok(Tracee {
                pid,
                saved: None,
                dirty: false,
                detached: false,
            }),
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Err(InjectError::Ended),
            Err(e) if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) => Err(
                InjectError::NotPermitted(format!("ptrace(PTRACE_SEIZE): {e}")),
            ),
            Err(e) => Err(InjectError::Failed(format!("ptrace(PTRACE_SEIZE): {e}"))),
        }
    }

    /// Waits for the next stop of the thread, at most until `deadline`.
    fn wait(&self, deadline: Instant) -> Result<Option<Stop>, InjectError> {
        loop {
            let mut status = 0;
            // SAFETY: waitpid writes the status into our local.
            let rc = unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG | libc::__WALL) };
            if rc == self.pid {
                if libc::WIFEXITED(status) || libc::WIFSIGNALED(status) {
                    return Ok(Some(Stop::Ended));
                }
                if libc::WIFSTOPPED(status) {
                    let sig = libc::WSTOPSIG(status);
                    return Ok(Some(if status >> 16 == PTRACE_EVENT_STOP {
                        Stop::Event(sig)
                    } else {
                        Stop::Signal(sig)
                    }));
                }
                continue;
            }
            if rc < 0 && errno() != libc::EINTR {
                return Err(InjectError::Failed(format!(
                    "waitpid: {}",
                    std::io::Error::last_os_error()
                )));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    fn resume(&self, sig: i32) -> Result<(), InjectError> {
        pt(PTRACE_CONT, self.pid, 0, sig as usize)
            .map(|_| ())
            .map_err(|e| InjectError::Failed(format!("ptrace(PTRACE_CONT): {e}")))
    }

    /// Stops the thread where it is. Signals that arrive first are
    /// delivered as they would have been.
    fn stop(&mut self) -> Result<(), InjectError> {
        pt(PTRACE_INTERRUPT, self.pid, 0, 0)
            .map_err(|e| InjectError::Failed(format!("ptrace(PTRACE_INTERRUPT): {e}")))?;
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            match self.wait(deadline)? {
                None => {
                    return Err(InjectError::Timeout {
                        what: "stopping the main thread",
                        secs: STOP_TIMEOUT.as_secs(),
                    })
                }
                Some(Stop::Ended) => {
                    self.detached = true;
                    return Err(InjectError::Ended);
                }
                Some(Stop::Event(sig)) if sig == libc::SIGTRAP => return Ok(()),
                // A group stop (SIGSTOP, SIGTSTP...): the job was just
                // stopped by someone; leave it stopped.
                Some(Stop::Event(_)) => return Err(InjectError::Stopped(self.pid as u32)),
                Some(Stop::Signal(sig)) => self.resume(sig)?,
            }
        }
    }

    fn save(&mut self) -> Result<(), InjectError> {
        // SAFETY: a plain C struct of integers; all-zero is valid.
        let mut regs: user_regs_struct = unsafe { std::mem::zeroed() };
        pt(PTRACE_GETREGS, self.pid, 0, &mut regs as *mut _ as usize)
            .map_err(|e| InjectError::Failed(format!("ptrace(PTRACE_GETREGS): {e}")))?;
        let mut buf = vec![0u8; XSTATE_MAX];
        let mut iov = libc::iovec {
            iov_base: buf.as_mut_ptr().cast(),
            iov_len: buf.len(),
        };
        let fp = match pt(
            PTRACE_GETREGSET,
            self.pid,
            NT_X86_XSTATE,
            &mut iov as *mut _ as usize,
        ) {
            Ok(_) => {
                buf.truncate(iov.iov_len);
                // Refuse now, with nothing changed yet, if the area cannot be
                // written back.
                let mut back = libc::iovec {
                    iov_base: buf.as_mut_ptr().cast(),
                    iov_len: buf.len(),
                };
                pt(
                    PTRACE_SETREGSET,
                    self.pid,
                    NT_X86_XSTATE,
                    &mut back as *mut _ as usize,
                )
                .map_err(|e| {
                    InjectError::Failed(format!(
                        "the kernel does not take the vector registers back ({e}): \
                         nothing was changed"
                    ))
                })?;
                Fp::Xstate(buf)
            }
            Err(_) => {
                // SAFETY: as above.
                let mut fx: Box<libc::user_fpregs_struct> = Box::new(unsafe { std::mem::zeroed() });
                pt(PTRACE_GETFPREGS, self.pid, 0, &mut *fx as *mut _ as usize)
                    .map_err(|e| InjectError::Failed(format!("ptrace(PTRACE_GETFPREGS): {e}")))?;
                Fp::Fx(fx)
            }
        };
        self.saved = Some(Saved { regs, fp });
        Ok(())
    }

    fn restore(&mut self) -> Result<(), InjectError> {
        let Some(saved) = self.saved.as_mut() else {
            return Ok(());
        };
        let fp = match &mut saved.fp {
            Fp::Xstate(buf) => {
                let mut iov = libc::iovec {
                    iov_base: buf.as_mut_ptr().cast(),
                    iov_len: buf.len(),
                };
                pt(
                    PTRACE_SETREGSET,
                    self.pid,
                    NT_X86_XSTATE,
                    &mut iov as *mut _ as usize,
                )
            }
            Fp::Fx(fx) => pt(PTRACE_SETFPREGS, self.pid, 0, &mut **fx as *mut _ as usize),
        };
        let gp = pt(
            PTRACE_SETREGS,
            self.pid,
            0,
            &saved.regs as *const _ as usize,
        );
        match (gp, fp) {
            (Ok(_), Ok(_)) => {
                self.dirty = false;
                Ok(())
            }
            (Err(e), _) | (_, Err(e)) => Err(InjectError::Failed(format!(
                "could not put the registers back: {e}"
            ))),
        }
    }

    /// Calls `func(args...)` in the stopped thread and returns `rax`.
    fn call(&mut self, func: u64, args: &[u64]) -> Result<u64, InjectError> {
        let saved = &self.saved.as_ref().expect("registers saved first").regs;
        let mut r = *saved;
        // A 16-byte aligned stack at the call, minus the return address.
        let sp = (saved.rsp.wrapping_sub(STACK_GAP) & !0xf).wrapping_sub(8);
        pt(PTRACE_POKEDATA, self.pid, sp as usize, 0)
            .map_err(|e| InjectError::Failed(format!("cannot write the stack: {e}")))?;
        r.rsp = sp;
        r.rip = func;
        let mut a = args.iter().copied().chain(std::iter::repeat(0));
        r.rdi = a.next().unwrap_or(0);
        r.rsi = a.next().unwrap_or(0);
        r.rdx = a.next().unwrap_or(0);
        r.rcx = a.next().unwrap_or(0);
        r.r8 = a.next().unwrap_or(0);
        r.r9 = a.next().unwrap_or(0);
        r.rax = 0;
        // Not in a system call any more: no restart when it resumes here.
        r.orig_rax = u64::MAX;
        // The ABI wants the direction flag clear at a call.
        r.eflags &= !0x400;
        self.dirty = true;
        pt(PTRACE_SETREGS, self.pid, 0, &r as *const _ as usize)
            .map_err(|e| InjectError::Failed(format!("ptrace(PTRACE_SETREGS): {e}")))?;
        self.resume(0)?;
        let deadline = Instant::now() + CALL_TIMEOUT;
        loop {
            match self.wait(deadline)? {
                None => {
                    // Blocked (a lock the stopped code holds): stop it and
                    // let Drop put the registers back, which abandons the call.
                    let _ = pt(PTRACE_INTERRUPT, self.pid, 0, 0);
                    let _ = self.wait(Instant::now() + STOP_TIMEOUT);
                    return Err(InjectError::Timeout {
                        what: "a call in the process",
                        secs: CALL_TIMEOUT.as_secs(),
                    });
                }
                Some(Stop::Ended) => {
                    self.detached = true;
                    return Err(InjectError::Ended);
                }
                Some(Stop::Signal(sig)) if sig == libc::SIGSEGV => {
                    // SAFETY: as in save().
                    let mut now: user_regs_struct = unsafe { std::mem::zeroed() };
                    pt(PTRACE_GETREGS, self.pid, 0, &mut now as *mut _ as usize)
                        .map_err(|e| InjectError::Failed(format!("ptrace(PTRACE_GETREGS): {e}")))?;
                    if now.rip == 0 {
                        // Returned to address 0: done. The fault is discarded
                        // when the thread resumes from the restored registers.
                        return Ok(now.rax);
                    }
                    return Err(InjectError::Failed(format!(
                        "the call faulted at {:#x}; registers restored",
                        now.rip
                    )));
                }
                // Another signal: delivered now, as it would have been; its
                // handler runs on the stack below the call's frame.
                Some(Stop::Signal(sig)) => self.resume(sig)?,
                Some(Stop::Event(_)) => self.resume(0)?,
            }
        }
    }

    /// Writes `bytes` at `addr` (a page the process mapped for us).
    fn write(&self, addr: u64, bytes: &[u8]) -> Result<(), InjectError> {
        let mem = std::fs::OpenOptions::new()
            .write(true)
            .open(format!("/proc/{}/mem", self.pid))?;
        mem.write_all_at(bytes, addr)?;
        Ok(())
    }

    /// Puts the registers back and lets the thread go.
    fn finish(mut self) -> Result<(), InjectError> {
        self.restore()?;
        self.detach()
    }

    fn detach(&mut self) -> Result<(), InjectError> {
        if self.detached {
            return Ok(());
        }
        self.detached = true;
        pt(PTRACE_DETACH, self.pid, 0, 0)
            .map(|_| ())
            .map_err(|e| InjectError::Failed(format!("ptrace(PTRACE_DETACH): {e}")))
    }
}

impl Drop for Tracee {
    fn drop(&mut self) {
        if self.detached {
            return;
        }
        if self.dirty {
            let _ = self.restore();
        }
        let _ = self.detach();
    }
}
