//! Step markers from the child's stdout (`--step-regex`). Every line is
//! re-emitted unchanged to leakspy's stdout, then matched.

use std::io::{Read, Write};
use std::sync::mpsc::Sender;
use std::thread::JoinHandle;
use std::time::Instant;

use regex::Regex;

/// A matched line: when, and which step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepMark {
    pub t: f64,
    pub step: u64,
}

/// Counts matches and picks the step number of a matching line: the first
/// capture group when it parses as an integer, else the running count.
#[derive(Debug, Clone)]
pub struct StepMatcher {
    regex: Regex,
    count: u64,
}

impl StepMatcher {
    pub fn new(regex: Regex) -> Self {
        StepMatcher { regex, count: 0 }
    }

    pub fn step_of(&mut self, line: &str) -> Option<u64> {
        let caps = self.regex.captures(line)?;
        self.count += 1;
        let numbered = caps
            .iter()
            .skip(1)
            .flatten()
            .next()
            .and_then(|m| m.as_str().trim().parse::<u64>().ok());
        Some(numbered.unwrap_or(self.count))
    }
}

/// Longest line kept for matching; longer ones are matched on their start.
const MAX_LINE: usize = 64 * 1024;

/// Reads `input` until EOF, copying every chunk to `sink` as soon as it
/// arrives (progress bars that redraw with `\r` stay live), and sending a
/// mark for each line (ended by `\n` or `\r`) that matches. A sink that
/// fails (leakspy's stdout closed) stops the copying but not the reading, so
/// the child never blocks on a full pipe.
pub fn spawn_reader<T: From<StepMark> + Send + 'static>(
    mut input: impl Read + Send + 'static,
    mut matcher: StepMatcher,
    start: Instant,
    mut sink: Box<dyn Write + Send>,
    tx: Sender<T>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("leakspy-stdout".into())
        .spawn(move || {
            let mut chunk = vec![0u8; 8192];
            let mut line: Vec<u8> = Vec::with_capacity(256);
            let mut sink_ok = true;
            let matched = |line: &[u8], matcher: &mut StepMatcher| {
                let text = String::from_utf8_lossy(line);
                if let Some(step) = matcher.step_of(&text) {
                    let t = start.elapsed().as_secs_f64();
                    // The monitor may be gone (it stopped waiting); nothing to do then.
                    let _ = tx.send(StepMark { t, step }.into());
                }
            };
            loop {
                let n = match input.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                };
                let data = &chunk[..n];
                if sink_ok {
                    sink_ok = sink.write_all(data).and_then(|()| sink.flush()).is_ok();
                }
                for &b in data {
                    if b == b'\n' || b == b'\r' {
                        if !line.is_empty() {
                            matched(&line, &mut matcher);
                            line.clear();
                        }
                    } else if line.len() < MAX_LINE {
                        line.push(b);
                    }
                }
            }
            if !line.is_empty() {
                matched(&line, &mut matcher);
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_group_gives_the_step_number() {
        let mut m = StepMatcher::new(Regex::new(r"step (\d+)").unwrap());
        assert_eq!(m.step_of("epoch 1 step 40 loss 0.3"), Some(40));
        assert_eq!(m.step_of("loss 0.3"), None);
        assert_eq!(m.step_of("step 41"), Some(41));
    }

    #[test]
    fn without_a_number_the_count_is_the_step() {
        let mut m = StepMatcher::new(Regex::new(r"^loss").unwrap());
        assert_eq!(m.step_of("loss 1"), Some(1));
        assert_eq!(m.step_of("nope"), None);
        assert_eq!(m.step_of("loss 2"), Some(2));
        let mut m = StepMatcher::new(Regex::new(r"it=(\w+)").unwrap());
        assert_eq!(m.step_of("it=abc"), Some(1));
    }

    #[test]
    fn lines_are_copied_unchanged_and_matches_sent() {
        #[derive(Clone, Default)]
        struct Shared(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);
        impl Write for Shared {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let input: &'static [u8] =
            b"hello\nstep 3\r\n\xffbinary step 4\nbar step 6\rbar step 7\rno newline step 5";
        let out = Shared::default();
        let (tx, rx) = std::sync::mpsc::channel();
        let m = StepMatcher::new(Regex::new(r"step (\d+)").unwrap());
        spawn_reader(input, m, Instant::now(), Box::new(out.clone()), tx)
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(out.0.lock().unwrap().as_slice(), input);
        let steps: Vec<u64> = rx.iter().map(|m: StepMark| m.step).collect();
        assert_eq!(steps, vec![3, 4, 6, 7, 5]);
    }
}
