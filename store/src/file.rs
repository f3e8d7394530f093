//! The file store: a folder per session under one directory.
//!
//! - `<dir>/<id>/nodes.jsonl`: one [`Node`] per line (compact JSON, `\n`-terminated). An
//!   append is one `write_all` of the whole batch, then `sync_data`; a whole tree is
//!   written to a temporary file, synced and renamed over it.
//! - `<dir>/<id>/session.json`: `{"created_ms": .., "state": ..}`, always replaced whole
//!   (temporary file, `sync_all`, `rename`, fsync of the folder), so a reader sees the old
//!   file or the new one, never half of one.
//!
//! When a session was last written is the newest modification time of its two files: every
//! write sets it to the store's clock (`File::set_modified`), so an append writes only
//! `nodes.jsonl` and still moves the session up the list.
//!
//! A crash between creating a session's folder and writing its `session.json` leaves a
//! folder without one. Such a session exists (its id is taken: `create` says
//! [`StoreErrorKind::Exists`], `delete` removes it), `load` says
//! [`StoreErrorKind::Corrupt`] naming the missing file, `list` leaves it out, and
//! `save_state` completes it. Nothing in it was ever reported saved, so nothing is lost.
//!
//! Paths are only ever made from a [`SessionId`], which is URL-safe base64: no `/`, no
//! `..`. Names starting with `.` (a deletion under way) are never ids, so `list` skips them.
//!
//! Ownership: `<dir>/<id>/lock`, locked by the owner ([`crate::lock`]); the lock goes
//! with the owner's process. A creator locks it before it writes anything else, so a
//! session is owned from its first byte; a deletion locks it too, then renames the
//! folder away, so a claimer that opened the old file finds its path gone and fails.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use omni_core::machines::session::store::{assemble, check_append};
use omni_core::machines::session::tree::{Node, Tree};
use serde::{Deserialize, Serialize};

use crate::lock::{owned_elsewhere, Locking, Owners, SessionLock};
use crate::{
    Claim, Loaded, SessionId, SessionInfo, SessionList, SessionState, Store, StoreError, StoreErrorKind, StoreWarning,
};

const NODES: &str = "nodes.jsonl";
const SESSION: &str = "session.json";
const LOCK: &str = "lock";
/// The prefix of a session folder being deleted (renamed out of the way first).
const DELETED: &str = ".deleted-";

/// Sessions kept as files under one directory (see the module's doc). Holds only the
/// path: any number of handles, in any number of processes, may share the directory.
#[derive(Debug, Clone)]
pub struct FileStore {
    dir: PathBuf,
    /// The sessions this store (and its clones) owns.
    owners: Owners,
}

/// What `session.json` holds.
#[derive(Serialize, Deserialize)]
struct SessionFile {
    created_ms: u64,
    state: SessionState,
}

impl FileStore {
    /// The store in `dir`, created if missing. Removes what deletions cut short by a crash
    /// left behind.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(|e| io_error(&e, &dir, "creating the store's directory"))?;
        let entries = fs::read_dir(&dir).map_err(|e| io_error(&e, &dir, "reading the store's directory"))?;
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with(DELETED) {
                // Best effort: another process may be removing it at this moment.
                let _ = fs::remove_dir_all(entry.path());
            }
        }
        Ok(Self { dir, owners: Owners::default() })
    }

    fn session_dir(&self, id: &SessionId) -> PathBuf {
        self.dir.join(id.as_str())
    }

    /// Takes session `id`'s lock: `wait` for a creator's (see [`SessionLock::take`]).
    fn lock(&self, id: &SessionId, wait: bool) -> Result<SessionLock, StoreError> {
        let dir = self.session_dir(id);
        let path = dir.join(LOCK);
        match SessionLock::take(&path, wait) {
            Ok(Locking::Taken(lock)) => Ok(lock),
            Ok(Locking::Held) => Err(owned_elsewhere(&display(&dir))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                Err(StoreError::new(StoreErrorKind::NotFound, display(&dir), "no such session"))
            }
            Err(e) => Err(io_error(&e, &path, "locking the session")),
        }
    }

    /// `Ok` when `claim` owns its session here.
    fn owned(&self, claim: &Claim) -> Result<(), StoreError> {
        self.owners.check(claim, &display(&self.session_dir(claim.session())))
    }

    /// The error for `e`, met at `path` in session `id`: a file that is not there means
    /// the session is not there, or, when its folder is, a session damaged or half-made.
    fn error(&self, id: &SessionId, e: &io::Error, path: &Path, doing: &str) -> StoreError {
        if e.kind() != io::ErrorKind::NotFound {
            return io_error(e, path, doing);
        }
        let dir = self.session_dir(id);
        if dir.is_dir() {
            StoreError::new(StoreErrorKind::Corrupt, display(path), format!("{doing}: the file is missing"))
        } else {
            StoreError::new(StoreErrorKind::NotFound, display(&dir), "no such session")
        }
    }

    /// Session `id`'s `session.json` and when it was last written.
    fn read_session(&self, id: &SessionId) -> Result<(SessionFile, SystemTime), StoreError> {
        let path = self.session_dir(id).join(SESSION);
        let read = |file: &mut File| -> io::Result<(Vec<u8>, SystemTime)> {
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)?;
            Ok((bytes, file.metadata()?.modified()?))
        };
        let (bytes, modified) = File::open(&path)
            .and_then(|mut file| read(&mut file))
            .map_err(|e| self.error(id, &e, &path, "reading the session"))?;
        let session = serde_json::from_slice(&bytes)
            .map_err(|e| StoreError::new(StoreErrorKind::Corrupt, display(&path), e.to_string()))?;
        Ok((session, modified))
    }

    /// Replaces session `id`'s `session.json`.
    fn write_session(&self, id: &SessionId, session: &SessionFile, at: SystemTime) -> Result<(), StoreError> {
        let dir = self.session_dir(id);
        let bytes = serde_json::to_vec(session)
            .map_err(|e| StoreError::new(StoreErrorKind::Io, display(&dir.join(SESSION)), e.to_string()))?;
        replace(&dir, SESSION, &bytes, at).map_err(|(e, path)| self.error(id, &e, &path, "writing the session"))
    }
}

impl Store for FileStore {
    fn create(&self, id: &SessionId, state: &SessionState) -> Result<Claim, StoreError> {
        let dir = self.session_dir(id);
        // `create_dir` (not `create_dir_all`) fails if the folder exists: the one atomic
        // check that lets exactly one of several creators, in any process, win.
        match fs::create_dir(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(StoreError::new(StoreErrorKind::Exists, display(&dir), "a session with this id exists"));
            }
            Err(e) => return Err(io_error(&e, &dir, "creating the session's folder")),
        }
        let at = SystemTime::now();
        let fill = || {
            // The lock first: the session is owned from its first byte.
            let lock = self.lock(id, true)?;
            // nodes.jsonl first: session.json, written last, marks the session complete.
            let nodes = dir.join(NODES);
            let write_nodes = || {
                let file = OpenOptions::new().write(true).create_new(true).open(&nodes)?;
                file.set_modified(at)?;
                file.sync_all()
            };
            write_nodes().map_err(|e| io_error(&e, &nodes, "creating the nodes file"))?;
            self.write_session(id, &SessionFile { created_ms: millis(at), state: state.clone() }, at)?;
            // The new folder's entry in the store's directory.
            sync_dir(&self.dir).map_err(|e| io_error(&e, &self.dir, "syncing the store's directory"))?;
            Ok(self.owners.keep(id, lock))
        };
        fill().inspect_err(|_| {
            // Without effect, as far as we can: the id is free again.
            let _ = fs::remove_dir_all(&dir);
        })
    }

    fn claim(&self, id: &SessionId) -> Result<Claim, StoreError> {
        let dir = self.session_dir(id);
        match fs::symlink_metadata(&dir) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => return Err(StoreError::new(StoreErrorKind::Corrupt, display(&dir), "not a session's folder")),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(StoreError::new(StoreErrorKind::NotFound, display(&dir), "no such session"))
            }
            Err(e) => return Err(io_error(&e, &dir, "looking for the session")),
        }
        let lock = self.lock(id, false)?;
        Ok(self.owners.keep(id, lock))
    }

    fn renew(&self, claim: &Claim) -> Result<(), StoreError> {
        self.owned(claim)
    }

    fn release(&self, claim: &Claim) -> Result<(), StoreError> {
        self.owners.release(claim);
        Ok(())
    }

    fn append_nodes(&self, claim: &Claim, nodes: &[Node]) -> Result<(), StoreError> {
        self.owned(claim)?;
        let id = claim.session();
        let path = self.session_dir(id).join(NODES);
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&path)
            .map_err(|e| self.error(id, &e, &path, "opening the nodes file"))?;
        if nodes.is_empty() {
            return Ok(());
        }
        let (keep, next) = good_end(&mut file, &path).map_err(|e| match e {
            Tail::Io(e) => io_error(&e, &path, "reading the end of the nodes file"),
            Tail::Corrupt(error) => error,
        })?;
        // A batch that does not follow the file would make it a list that is not a tree:
        // refused before anything is written.
        check_append(next, nodes, &display(&path))?;
        let mut batch = Vec::new();
        for node in nodes {
            serde_json::to_writer(&mut batch, node)
                .map_err(|e| StoreError::new(StoreErrorKind::Io, display(&path), e.to_string()))?;
            batch.push(b'\n');
        }
        let write = |file: &mut File| -> io::Result<()> {
            // A torn record left by a crash (which load leaves out) is cut off first:
            // appended after, it would become a corrupt line in the middle.
            if keep < file.metadata()?.len() {
                file.set_len(keep)?;
            }
            file.write_all(&batch)?;
            file.set_modified(SystemTime::now())?;
            file.sync_data()
        };
        write(&mut file).map_err(|e| {
            // Without effect, as far as we can: a part of the batch must not stay behind.
            let _ = file.set_len(keep);
            io_error(&e, &path, "appending nodes")
        })
    }

    fn save_tree(&self, claim: &Claim, tree: &Tree) -> Result<(), StoreError> {
        self.owned(claim)?;
        let id = claim.session();
        let dir = self.session_dir(id);
        let mut bytes = Vec::new();
        for node in tree.nodes() {
            serde_json::to_writer(&mut bytes, node)
                .map_err(|e| StoreError::new(StoreErrorKind::Io, display(&dir.join(NODES)), e.to_string()))?;
            bytes.push(b'\n');
        }
        replace(&dir, NODES, &bytes, SystemTime::now())
            .map_err(|(e, path)| self.error(id, &e, &path, "writing the nodes"))
    }

    fn save_state(&self, claim: &Claim, state: &SessionState) -> Result<(), StoreError> {
        self.owned(claim)?;
        let id = claim.session();
        let at = SystemTime::now();
        let created_ms = match self.read_session(id) {
            Ok((session, _)) => session.created_ms,
            // A session.json damaged or never written (a crash inside `create`): this
            // write replaces it whole, so it is repaired, its creation time now.
            Err(e) if e.kind == StoreErrorKind::Corrupt => millis(at),
            Err(e) => return Err(e),
        };
        self.write_session(id, &SessionFile { created_ms, state: state.clone() }, at)
    }

    fn load(&self, id: &SessionId) -> Result<Loaded, StoreError> {
        // The state before the nodes: a session appends its nodes, then saves the state
        // that points at them, so a state read first names only nodes already there.
        let (session, _) = self.read_session(id)?;
        let path = self.session_dir(id).join(NODES);
        let bytes = fs::read(&path).map_err(|e| self.error(id, &e, &path, "reading the nodes"))?;
        let (nodes, torn) = parse_nodes(&bytes, &display(&path))?;
        let warnings =
            torn.map(|bytes| StoreWarning::TornRecord { location: display(&path), bytes }).into_iter().collect();
        assemble(nodes, session.state, warnings, &display(&self.session_dir(id)))
    }

    fn list(&self, limit: usize, offset: usize) -> Result<SessionList, StoreError> {
        let entries = fs::read_dir(&self.dir).map_err(|e| io_error(&e, &self.dir, "listing sessions"))?;
        let mut all = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_error(&e, &self.dir, "listing sessions"))?;
            let Some(id) = entry.file_name().to_str().and_then(|name| SessionId::new(name).ok()) else { continue };
            if !entry.file_type().is_ok_and(|kind| kind.is_dir()) {
                continue;
            }
            let (session, session_modified) = match self.read_session(&id) {
                Ok(read) => read,
                // Half-made, damaged, or deleted since the directory was read: `load`
                // reports the first two.
                Err(e) if matches!(e.kind, StoreErrorKind::Corrupt | StoreErrorKind::NotFound) => continue,
                Err(e) => return Err(e),
            };
            let nodes = self.session_dir(&id).join(NODES);
            let nodes_modified = match fs::metadata(&nodes).and_then(|meta| meta.modified()) {
                Ok(modified) => modified,
                Err(e) if e.kind() == io::ErrorKind::NotFound => UNIX_EPOCH,
                Err(e) => return Err(io_error(&e, &nodes, "reading when the nodes were written")),
            };
            let updated = session_modified.max(nodes_modified);
            let info = SessionInfo {
                id,
                title: session.state.title,
                created_ms: session.created_ms,
                updated_ms: millis(updated).max(session.created_ms),
            };
            all.push((updated, info));
        }
        // Newest first by the full-precision time; ties by id, so pages do not shift.
        all.sort_by(|(a, a_info), (b, b_info)| b.cmp(a).then_with(|| a_info.id.cmp(&b_info.id)));
        let sessions = all.into_iter().skip(offset).take(limit).map(|(_, info)| info).collect();
        Ok(SessionList { sessions, unreadable: Vec::new() })
    }

    fn delete(&self, id: &SessionId) -> Result<bool, StoreError> {
        let dir = self.session_dir(id);
        if self.owners.holds(id) {
            return Err(owned_elsewhere(&display(&dir)));
        }
        // Held through the rename: no owner can come between.
        let _lock = match self.lock(id, false) {
            Ok(lock) => lock,
            Err(e) if e.kind == StoreErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(e),
        };
        // Renamed out of the way first (atomic): a reader sees the whole session or none,
        // never one being removed file by file.
        let doomed = self.dir.join(format!("{DELETED}{id}-{}", unique()));
        match fs::rename(&dir, &doomed) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(e) => return Err(io_error(&e, &dir, "deleting the session")),
        }
        sync_dir(&self.dir).map_err(|e| io_error(&e, &self.dir, "syncing the store's directory"))?;
        fs::remove_dir_all(&doomed).map_err(|e| io_error(&e, &doomed, "removing a deleted session's files"))?;
        Ok(true)
    }

    fn exists(&self, id: &SessionId) -> Result<bool, StoreError> {
        let dir = self.session_dir(id);
        match fs::metadata(&dir) {
            Ok(meta) => Ok(meta.is_dir()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_error(&e, &dir, "looking for the session")),
        }
    }
}

/// The nodes of a `nodes.jsonl`, and the bytes of a torn last record left out: the last
/// line when it does not end in `\n`, or does but is not a node. A line in the middle that
/// is not a node is [`StoreErrorKind::Corrupt`] at `<location>:<line>`.
fn parse_nodes(bytes: &[u8], location: &str) -> Result<(Vec<Node>, Option<usize>), StoreError> {
    let (whole, fragment) = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(end) => bytes.split_at(end + 1),
        None => bytes.split_at(0),
    };
    let mut nodes = Vec::new();
    let mut lines = whole.split_inclusive(|&b| b == b'\n').enumerate().peekable();
    while let Some((n, line)) = lines.next() {
        match serde_json::from_slice(&line[..line.len() - 1]) {
            Ok(node) => nodes.push(node),
            Err(_) if fragment.is_empty() && lines.peek().is_none() => return Ok((nodes, Some(line.len()))),
            Err(e) => {
                return Err(StoreError::new(StoreErrorKind::Corrupt, format!("{location}:{}", n + 1), e.to_string()));
            }
        }
    }
    Ok((nodes, (!fragment.is_empty()).then_some(fragment.len())))
}

/// Why the end of a nodes file could not be read.
enum Tail {
    Io(io::Error),
    Corrupt(StoreError),
}

impl From<io::Error> for Tail {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

/// Where the good records of a nodes file end (what follows is torn, by the same rule as
/// [`parse_nodes`]), and the id the next node must have. Reads only the last line or two.
fn good_end(file: &mut File, path: &Path) -> Result<(u64, u64), Tail> {
    let len = file.metadata()?.len();
    let Some((start, end, line)) = last_line(file, len)? else { return Ok((0, 0)) };
    match serde_json::from_slice::<Node>(&line) {
        Ok(node) => Ok((end, node.id.0 + 1)),
        // A last line that ends in `\n` but is not a node is torn: cut from its start, and
        // the line before it decides the next id.
        Err(_) if end == len => match last_line(file, start)? {
            None => Ok((start, 0)),
            Some((_, _, before)) => match serde_json::from_slice::<Node>(&before) {
                Ok(node) => Ok((start, node.id.0 + 1)),
                Err(e) => Err(Tail::Corrupt(corrupt_before_end(path, &e))),
            },
        },
        Err(e) => Err(Tail::Corrupt(corrupt_before_end(path, &e))),
    }
}

fn corrupt_before_end(path: &Path, e: &serde_json::Error) -> StoreError {
    let message = format!("a line before the last is not a node ({e}); loading names its line");
    StoreError::new(StoreErrorKind::Corrupt, display(path), message)
}

/// The last `\n`-terminated line wholly before `end`: its start, its end (after the `\n`)
/// and its bytes (without it). Reads backwards in doubling windows, so a long file costs
/// about the length of its last line.
fn last_line(file: &mut File, end: u64) -> io::Result<Option<(u64, u64, Vec<u8>)>> {
    let mut window = 4096u64;
    loop {
        let start = end.saturating_sub(window);
        let mut buf = vec![0; usize::try_from(end - start).map_err(io::Error::other)?];
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut buf)?;
        if let Some(newline) = buf.iter().rposition(|&b| b == b'\n') {
            if let Some(before) = buf[..newline].iter().rposition(|&b| b == b'\n') {
                let line = buf[before + 1..newline].to_vec();
                return Ok(Some((start + before as u64 + 1, start + newline as u64 + 1, line)));
            }
            if start == 0 {
                buf.truncate(newline);
                return Ok(Some((0, newline as u64 + 1, buf)));
            }
        } else if start == 0 {
            return Ok(None);
        }
        window *= 2;
    }
}

/// Replaces `dir/name` with `bytes` whole: a temporary file in the same folder, written,
/// dated `at`, synced and renamed over it, then the folder synced so the rename lasts.
/// The error comes with the file it concerns.
fn replace(dir: &Path, name: &str, bytes: &[u8], at: SystemTime) -> Result<(), (io::Error, PathBuf)> {
    let target = dir.join(name);
    let temp = dir.join(format!("{name}.tmp-{}", unique()));
    let write = || -> io::Result<()> {
        let mut file = OpenOptions::new().write(true).create_new(true).open(&temp)?;
        file.write_all(bytes)?;
        file.set_modified(at)?;
        file.sync_all()
    };
    if let Err(e) = write().and_then(|()| fs::rename(&temp, &target)) {
        let _ = fs::remove_file(&temp);
        return Err((e, target));
    }
    sync_dir(dir).map_err(|e| (e, dir.to_path_buf()))
}

/// Makes the entries of folder `dir` (a rename, a new file) durable.
#[cfg(unix)]
fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Elsewhere a folder cannot be opened as a file to sync; the rename is still atomic.
#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> io::Result<()> {
    Ok(())
}

/// A name no other writer, in this process or another, picks at the same time.
fn unique() -> String {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    format!("{}-{}-{nanos}", std::process::id(), COUNT.fetch_add(1, Ordering::Relaxed))
}

fn millis(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn display(path: &Path) -> String {
    path.display().to_string()
}

/// `e` met at `path`: a refused permission is [`StoreErrorKind::Denied`], anything else
/// [`StoreErrorKind::Io`].
fn io_error(e: &io::Error, path: &Path, doing: &str) -> StoreError {
    let kind = if e.kind() == io::ErrorKind::PermissionDenied { StoreErrorKind::Denied } else { StoreErrorKind::Io };
    StoreError::new(kind, display(path), format!("{doing}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(id: u64) -> String {
        format!(
            "{{\"id\":{id},\"message\":{{\"role\":\"user\",\"content\":[{{\"type\":\"text\",\"text\":\"x\"}}]}}}}\n"
        )
    }

    #[test]
    fn torn_records_are_only_ever_the_last() {
        let two = format!("{}{}", line(0), line(1));
        assert_eq!(parse_nodes(b"", "f").unwrap().0.len(), 0);
        let (nodes, torn) = parse_nodes(two.as_bytes(), "f").unwrap();
        assert_eq!((nodes.len(), torn), (2, None));
        let (nodes, torn) = parse_nodes(format!("{two}{{\"id\":2").as_bytes(), "f").unwrap();
        assert_eq!((nodes.len(), torn), (2, Some(7)), "a fragment without its newline");
        let (nodes, torn) = parse_nodes(format!("{two}\n").as_bytes(), "f").unwrap();
        assert_eq!((nodes.len(), torn), (2, Some(1)), "a last line that is not a node");
        let whole = line(2);
        let (nodes, torn) = parse_nodes(&whole.as_bytes()[..whole.len() - 1], "f").unwrap();
        assert_eq!((nodes.len(), torn), (0, Some(whole.len() - 1)), "a node never terminated was never saved");
        let error = parse_nodes(format!("{}junk\n{}", line(0), line(1)).as_bytes(), "f").unwrap_err();
        assert_eq!((error.kind, error.location.as_str()), (StoreErrorKind::Corrupt, "f:2"));
        let error = parse_nodes(format!("{}junk\n{{\"id\"", line(0)).as_bytes(), "f").unwrap_err();
        assert_eq!(error.location, "f:2", "a bad line before a fragment is in the middle");
    }
}
