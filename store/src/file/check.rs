//! What a store path must be before it is opened. Anything else in its place is
//! [`StoreErrorKind::Corrupt`], found without blocking: a FIFO opened for reading blocks
//! until a writer comes (forever, if none does), a device or a socket would mislead the
//! reads that follow, and a folder where a file should be fails in ways that name
//! nothing useful.
//!
//! Each path is checked before it is opened (`metadata`, which follows a symlink to what
//! it names: a symlink to a regular file is one), and the opened file again (its own
//! `metadata`), so a file swapped in between the two is caught before it is read. A FIFO
//! swapped in between the check and the open could still block that open; nothing but a
//! hostile writer in the store's directory does that.

use std::fs::{self, File, Metadata, OpenOptions};
use std::io;
use std::path::Path;

use super::display;
use crate::{StoreError, StoreErrorKind};

/// What a path is expected to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expect {
    /// A regular file.
    File,
    /// A folder.
    Folder,
}

/// Why a path could not be used: it is missing (for the caller to say what that means:
/// a session not there, or a file of one missing), or anything else, said already.
#[derive(Debug)]
pub(super) enum Bad {
    Missing(io::Error),
    Error(StoreError),
}

impl Bad {
    /// The error, with `missing` saying what a missing path means.
    pub(super) fn or_missing(self, missing: impl FnOnce(io::Error) -> StoreError) -> StoreError {
        match self {
            Self::Missing(e) => missing(e),
            Self::Error(error) => error,
        }
    }
}

/// `Ok` when `path` is what `expect` says (following symlinks), without opening it.
pub(super) fn check(path: &Path, expect: Expect) -> Result<Metadata, Bad> {
    match fs::metadata(path) {
        Ok(meta) => matches(path, meta, expect),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(Bad::Missing(e)),
        Err(e) => Err(Bad::Error(super::io_error(&e, path, "looking at the file"))),
    }
}

/// `path` opened with `options` once it is checked to be a regular file, and checked
/// again once open. `doing` says what for, in errors.
pub(super) fn open(path: &Path, options: &OpenOptions, doing: &str) -> Result<File, Bad> {
    check(path, Expect::File)?;
    let file = options.open(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Bad::Missing(e),
        _ => Bad::Error(super::io_error(&e, path, doing)),
    })?;
    let meta = file.metadata().map_err(|e| Bad::Error(super::io_error(&e, path, doing)))?;
    matches(path, meta, Expect::File)?;
    Ok(file)
}

fn matches(path: &Path, meta: Metadata, expect: Expect) -> Result<Metadata, Bad> {
    let fits = match expect {
        Expect::File => meta.is_file(),
        Expect::Folder => meta.is_dir(),
    };
    if fits {
        return Ok(meta);
    }
    let wanted = match expect {
        Expect::File => "a regular file",
        Expect::Folder => "a session's folder",
    };
    let message = format!("{} where {wanted} should be", describe(&meta));
    Err(Bad::Error(StoreError::new(StoreErrorKind::Corrupt, display(path), message)))
}

/// What `meta` describes, in words.
fn describe(meta: &Metadata) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let kind = meta.file_type();
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_block_device() || kind.is_char_device() {
            return "a device";
        }
    }
    if meta.is_dir() {
        "a folder"
    } else if meta.is_file() {
        "a regular file"
    } else {
        "something that is not a regular file"
    }
}
