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
//! [`StoreErrorKind::Corrupt`] naming the missing file, `list` reports it among the
//! unreadable entries, and `save_state` completes it. Nothing in it was ever reported
//! saved, so nothing is lost. A crash in the middle of a whole-file write leaves a
//! temporary file, and one in the middle of a deletion a renamed folder: opening the
//! store removes them ([`tidy`]).
//!
//! Every file is checked to be a regular file before it is read, and every session folder
//! to be a folder ([`check`]): anything else in their place (a FIFO, a socket, a device)
//! is [`StoreErrorKind::Corrupt`], found without blocking on it.
//!
//! Paths are only ever made from a [`SessionId`], which is URL-safe base64: no `/`, no
//! `..`. Names that are not ids (a deletion under way, `.DS_Store`) are never sessions,
//! so `list` skips them without a word.
//!
//! Ownership: `<dir>/<id>/lock`, locked by the owner ([`crate::lock`]); the lock goes
//! with the owner's process. A creator locks it before it writes anything else, so a
//! session is owned from its first byte; a deletion locks it too, then renames the
//! folder away, so a claimer that opened the old file finds its path gone and fails.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use omni_protocol::session::{assemble, check_append};
use omni_protocol::session::{Node, Tree};
use serde::{Deserialize, Serialize};

use crate::lock::{owned_elsewhere, Locking, Owners, SessionLock};
use crate::{
    Claim, Loaded, SessionId, SessionInfo, SessionList, SessionState, Store, StoreError, StoreErrorKind, StoreWarning,
};

use self::check::{Bad, Expect};
use self::nodes::{good_end, parse_nodes, Tail};

mod check;
mod nodes;
mod tidy;

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
    /// The store in `dir`, created if missing. Removes what crashes left behind
    /// (deletions cut short, temporary files of a replace), never a file an owner in
    /// another process may be writing.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let dir = dir.into();
        fs::create_dir_all(&dir).map_err(|e| io_error(&e, &dir, "creating the store's directory"))?;
        fs::read_dir(&dir).map_err(|e| io_error(&e, &dir, "reading the store's directory"))?;
        tidy::tidy(&dir);
        Ok(Self { dir, owners: Owners::default() })
    }

    fn session_dir(&self, id: &SessionId) -> PathBuf {
        self.dir.join(id.as_str())
    }

    fn not_found(&self, id: &SessionId) -> StoreError {
        StoreError::new(StoreErrorKind::NotFound, display(&self.session_dir(id)), "no such session")
    }

    /// Session `id`'s folder, checked to be one: [`StoreErrorKind::NotFound`] when there
    /// is nothing under its name, [`StoreErrorKind::Corrupt`] when what is there is not a
    /// folder (a file under it would fail with an error that names nothing useful).
    fn folder(&self, id: &SessionId) -> Result<PathBuf, StoreError> {
        let dir = self.session_dir(id);
        check::check(&dir, Expect::Folder).map_err(|bad| bad.or_missing(|_| self.not_found(id)))?;
        Ok(dir)
    }

    /// File `name` of session `id`, opened with `options` once checked to be a regular
    /// file: a missing one is a session not there, or damaged.
    fn open_file(&self, id: &SessionId, name: &str, options: &OpenOptions, doing: &str) -> Result<File, StoreError> {
        let path = self.folder(id)?.join(name);
        check::open(&path, options, doing).map_err(|bad| bad.or_missing(|e| self.error(id, &e, &path, doing)))
    }

    /// Takes session `id`'s lock: `wait` for a creator's (see [`SessionLock::take`]).
    fn lock(&self, id: &SessionId, wait: bool) -> Result<SessionLock, StoreError> {
        let path = self.folder(id)?.join(LOCK);
        // Checked here for the typed error; `SessionLock::take` checks again right before
        // it opens the file.
        match check::check(&path, Expect::File) {
            Ok(_) | Err(Bad::Missing(_)) => {}
            Err(Bad::Error(error)) => return Err(error),
        }
        match SessionLock::take(&path, wait) {
            Ok(Locking::Taken(lock)) => Ok(lock),
            Ok(Locking::Held) => Err(owned_elsewhere(&display(&self.session_dir(id)))),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(self.not_found(id)),
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
        if self.session_dir(id).is_dir() {
            StoreError::new(StoreErrorKind::Corrupt, display(path), format!("{doing}: the file is missing"))
        } else {
            self.not_found(id)
        }
    }

    /// Session `id`'s `session.json` and when it was last written.
    fn read_session(&self, id: &SessionId) -> Result<(SessionFile, SystemTime), StoreError> {
        let doing = "reading the session";
        let mut file = self.open_file(id, SESSION, OpenOptions::new().read(true), doing)?;
        let path = self.session_dir(id).join(SESSION);
        let read = |file: &mut File| -> io::Result<(Vec<u8>, SystemTime)> {
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes)?;
            Ok((bytes, file.metadata()?.modified()?))
        };
        let (bytes, modified) = read(&mut file).map_err(|e| io_error(&e, &path, doing))?;
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

    /// Session `id` as `list` shows it, and when it was last written at full precision.
    fn info(&self, id: SessionId) -> Result<(SystemTime, SessionInfo), StoreError> {
        let (session, session_modified) = self.read_session(&id)?;
        // Only looked at, not opened: but a session whose nodes cannot be loaded is not a
        // readable one, so it is reported as `load` would.
        let nodes = self.session_dir(&id).join(NODES);
        let meta = check::check(&nodes, Expect::File)
            .map_err(|bad| bad.or_missing(|e| self.error(&id, &e, &nodes, "reading the nodes")))?;
        let nodes_modified =
            meta.modified().map_err(|e| io_error(&e, &nodes, "reading when the nodes were written"))?;
        let updated = session_modified.max(nodes_modified);
        let info = SessionInfo {
            id,
            title: session.state.title,
            created_ms: session.created_ms,
            updated_ms: millis(updated).max(session.created_ms),
        };
        Ok((updated, info))
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
        let lock = self.lock(id, false)?;
        // A folder without its session.json is a session being created (whose creator
        // waits for this lock: given back at once) or one a crash cut inside `create`:
        // neither is a session to own.
        let session = self.session_dir(id).join(SESSION);
        match check::check(&session, Expect::File) {
            Ok(_) => Ok(self.owners.keep(id, lock)),
            Err(Bad::Missing(_)) => {
                drop(lock);
                Err(StoreError::new(StoreErrorKind::Corrupt, display(&session), "half-made: the file is missing"))
            }
            Err(Bad::Error(error)) => Err(error),
        }
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
        let mut file =
            self.open_file(id, NODES, OpenOptions::new().read(true).append(true), "opening the nodes file")?;
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
        let dir = self.folder(id)?;
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
        // Something that is not a file in session.json's place was not written by a store:
        // left for a person to look at rather than replaced.
        let path = self.folder(id)?.join(SESSION);
        if let Err(Bad::Error(error)) = check::check(&path, Expect::File) {
            return Err(error);
        }
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
        let doing = "reading the nodes";
        let mut file = self.open_file(id, NODES, OpenOptions::new().read(true), doing)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes).map_err(|e| io_error(&e, &path, doing))?;
        let (nodes, torn) = parse_nodes(&bytes, &display(&path))?;
        let warnings =
            torn.map(|bytes| StoreWarning::TornRecord { location: display(&path), bytes }).into_iter().collect();
        assemble(nodes, session.state, warnings, &display(&self.session_dir(id)))
    }

    /// Every entry named as a session id is listed or reported: a half-made or damaged
    /// session, a file or a FIFO where a session's folder should be. One entry's failure
    /// never hides the others; only a store directory that cannot be read fails the call.
    fn list(&self, limit: usize, offset: usize) -> Result<SessionList, StoreError> {
        let entries = fs::read_dir(&self.dir).map_err(|e| io_error(&e, &self.dir, "listing sessions"))?;
        let mut all = Vec::new();
        let mut unreadable = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| io_error(&e, &self.dir, "listing sessions"))?;
            let Some(id) = entry.file_name().to_str().and_then(|name| SessionId::new(name).ok()) else { continue };
            match self.info(id) {
                Ok(listed) => all.push(listed),
                // Deleted since the directory was read.
                Err(e) if e.kind == StoreErrorKind::NotFound => {}
                Err(e) => unreadable.push(e),
            }
        }
        // Newest first by the full-precision time; ties by id, so pages do not shift.
        all.sort_by(|(a, a_info), (b, b_info)| b.cmp(a).then_with(|| a_info.id.cmp(&b_info.id)));
        unreadable.sort_by(|a, b| a.location.cmp(&b.location));
        let sessions = all.into_iter().skip(offset).take(limit).map(|(_, info)| info).collect();
        Ok(SessionList { sessions, unreadable })
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

    /// Whether anything is under the id's name: the id is taken (`create` says
    /// [`StoreErrorKind::Exists`]), even when what is there is not a readable session.
    fn exists(&self, id: &SessionId) -> Result<bool, StoreError> {
        let dir = self.session_dir(id);
        match fs::symlink_metadata(&dir) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(io_error(&e, &dir, "looking for the session")),
        }
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
