//! Streaming writer: one event per line, each written with a single
//! `write_all` and flushed, so a killed run leaves whole lines (at worst a
//! torn last one, which the reader skips).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::{Event, Header, TraceError};

pub struct TraceWriter {
    file: File,
    path: PathBuf,
    line: Vec<u8>,
}

impl TraceWriter {
    /// Creates (truncates) the trace file. Fails with a message naming the
    /// path when the file or its folder cannot be written; the folder is not
    /// created here (the caller decides whether a missing folder is an error).
    pub fn create(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref().to_path_buf();
        let file = File::create(&path).map_err(|source| TraceError::Create {
            path: path.clone(),
            source,
        })?;
        Ok(TraceWriter {
            file,
            path,
            line: Vec::with_capacity(1024),
        })
    }

    /// Opens an existing trace to add events at its end (the end of a run
    /// adds what `check` said of its sources after the job's last event).
    pub fn append(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let path = path.as_ref().to_path_buf();
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .map_err(|source| TraceError::Write {
                path: path.clone(),
                source,
            })?;
        Ok(TraceWriter {
            file,
            path,
            line: Vec::with_capacity(1024),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes the header line. Call once, first.
    pub fn write_header(&mut self, header: &Header) -> Result<(), TraceError> {
        self.write(&Event::Header(header.clone()))
    }

    /// Appends one event and flushes it to the OS.
    pub fn write(&mut self, event: &Event) -> Result<(), TraceError> {
        self.line.clear();
        serde_json::to_writer(&mut self.line, event)?;
        self.line.push(b'\n');
        self.file
            .write_all(&self.line)
            .and_then(|()| self.file.flush())
            .map_err(|source| TraceError::Write {
                path: self.path.clone(),
                source,
            })
    }

    /// Asks the OS to put the trace on disk (end of run; not per event, that would be slow).
    pub fn sync(&mut self) -> Result<(), TraceError> {
        self.file.sync_data().map_err(|source| TraceError::Write {
            path: self.path.clone(),
            source,
        })
    }
}
