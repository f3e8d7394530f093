//! What a crash leaves behind, removed when a store is opened (best effort: a file that
//! cannot be removed now is tried again at the next open):
//!
//! - `.deleted-*` folders: a deletion renames the session's folder away, then removes it;
//!   a crash in between leaves the renamed folder.
//! - `session.json.tmp-*` and `nodes.jsonl.tmp-*`: a whole-file write goes to a temporary
//!   file renamed over the old one; a crash before the rename leaves the temporary file.
//!   A temporary file of a session someone owns may be one its owner is writing at this
//!   moment (in another process), so a session's are removed only while its lock can be
//!   taken: an owner writes only while it holds that lock.

use std::fs;
use std::path::{Path, PathBuf};

use super::{DELETED, LOCK, NODES, SESSION};
use crate::lock::{Locking, SessionLock};
use crate::SessionId;

/// Removes what crashes left in the store's directory `dir`.
pub(super) fn tidy(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(DELETED) {
            // Another process may be removing it at this moment: then one of us wins.
            let _ = fs::remove_dir_all(entry.path());
        } else if SessionId::new(name.as_ref()).is_ok() {
            remove_temps(&entry.path());
        }
    }
}

/// Whether `name` is a temporary file of a whole-file write.
fn is_temp(name: &str) -> bool {
    [SESSION, NODES].iter().any(|file| name.strip_prefix(file).is_some_and(|rest| rest.starts_with(".tmp-")))
}

/// Removes the temporary files in session folder `folder`, unless its session is owned.
fn remove_temps(folder: &Path) {
    // Not a folder (or not readable): nothing to do here; `load` and `list` report it.
    let Ok(entries) = fs::read_dir(folder) else { return };
    let temps: Vec<PathBuf> = entries
        .flatten()
        .filter(|entry| is_temp(&entry.file_name().to_string_lossy()))
        .map(|entry| entry.path())
        .collect();
    if temps.is_empty() {
        // Most folders: their lock is left alone (taking it would count an owner).
        return;
    }
    // Held while removing: no owner can start a write meanwhile.
    let Ok(Locking::Taken(_lock)) = SessionLock::take(&folder.join(LOCK), false) else { return };
    for temp in temps {
        let _ = fs::remove_file(temp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_files_are_named_after_the_file_they_replace() {
        assert!(is_temp("session.json.tmp-1-2-3"));
        assert!(is_temp("nodes.jsonl.tmp-1-2-3"));
        for other in ["session.json", "nodes.jsonl", "lock", "session.json.tmp", "notes.tmp-1", "session.jsonx.tmp-1"] {
            assert!(!is_temp(other), "{other}");
        }
    }
}
