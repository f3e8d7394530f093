//! Ownership through the operating system: a session's lock file, held with an exclusive
//! advisory lock (`flock` on Unix, `LockFileEx` on Windows, through [`File::try_lock`]).
//!
//! Why a lock the OS holds, rather than an owner written into the store: the lock goes
//! when the process that holds it ends, however it ends (a kill, a panic, a power cut),
//! so a crashed owner never leaves its session locked, and nobody has to guess whether
//! an owner that stopped writing is dead or slow. The lock belongs to the open file, not
//! the process: two handles in one process that each open the file exclude each other
//! as two processes do.
//!
//! One caveat of every lock of this kind: a process that starts another process copies
//! its open files into the child for the moment between the fork and the child's `exec`
//! (the lock files are opened close-on-exec, so never longer). A lock released in that
//! moment is held until the `exec`: a claim made right then is refused as owned
//! elsewhere, and succeeds when tried again a moment later.
//!
//! The file also counts the session's owners: each new owner writes the next fencing
//! token into it while it holds the lock, so tokens rise from owner to owner. A holder
//! checks before each write that the path still names the file it locked
//! ([`SessionLock::still_held`]): a session folder removed behind its back (by hand)
//! fences it as a lost lock would.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::{Claim, SessionId, StoreError, StoreErrorKind};

/// An exclusive lock on one lock file, held while this value lives.
#[derive(Debug)]
pub struct SessionLock {
    file: File,
    path: PathBuf,
    /// The fencing token this owner wrote.
    token: u64,
}

/// How taking a lock ended.
#[derive(Debug)]
pub enum Locking {
    /// Taken, with the new owner's token.
    Taken(SessionLock),
    /// Another open file holds it.
    Held,
}

impl SessionLock {
    /// Takes the lock on `path` (created if missing) without waiting, and writes the next
    /// token into it. `wait` waits for the lock instead (only for a lock nobody else can
    /// hold for long: a creator's, whose session is not readable yet).
    pub fn take(path: &Path, wait: bool) -> io::Result<Locking> {
        // A lock file removed by its holder (a deleted session) between our open and our
        // lock leaves us a lock on a file nobody else looks at: open again.
        for _ in 0..8 {
            let Some(mut file) = Self::lock_file(path, wait)? else { return Ok(Locking::Held) };
            if same_file(&file, path) {
                return Self::count_owner(&mut file)
                    .map(|token| Locking::Taken(Self { file, path: path.to_path_buf(), token }));
            }
        }
        Ok(Locking::Held)
    }

    /// The lock file opened and locked; `None` when another open file holds it.
    fn lock_file(path: &Path, wait: bool) -> io::Result<Option<File>> {
        regular_or_missing(path)?;
        let file = OpenOptions::new().read(true).write(true).create(true).truncate(false).open(path)?;
        if !file.metadata()?.is_file() {
            return Err(io::Error::other(format!("{} is not a regular file", path.display())));
        }
        if wait {
            file.lock()?;
        } else {
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => return Ok(None),
                Err(TryLockError::Error(e)) => return Err(e),
            }
        }
        Ok(Some(file))
    }

    /// Writes the next owner's token into the locked `file`: the last one's plus one.
    fn count_owner(file: &mut File) -> io::Result<u64> {
        // The token the last owner left, and one more. Written at offset 0 as decimal text
        // padded to a fixed width, so a shorter number never leaves digits behind.
        let mut text = String::new();
        file.seek(SeekFrom::Start(0))?;
        Read::by_ref(file).take(64).read_to_string(&mut text)?;
        let last: u64 = text.trim().parse().unwrap_or(0);
        let token = last.saturating_add(1);
        file.seek(SeekFrom::Start(0))?;
        file.write_all(format!("{token:020}\n").as_bytes())?;
        Ok(token)
    }

    /// The token this owner wrote.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// Makes this owner's token `token` when that is higher (a store that keeps the last
    /// owner's token elsewhere too, and will not hand out one below it), and writes it
    /// into the file, so that the next owner's is higher still.
    pub fn raise(&mut self, token: u64) -> io::Result<()> {
        if token > self.token {
            self.file.seek(SeekFrom::Start(0))?;
            self.file.write_all(format!("{token:020}\n").as_bytes())?;
            self.token = token;
        }
        Ok(())
    }

    /// Whether the path still names the locked file (a folder removed or replaced by hand
    /// leaves the lock on a file nobody else will ever look at).
    pub fn still_held(&self) -> bool {
        same_file(&self.file, &self.path)
    }
}

#[cfg(unix)]
fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), fs::metadata(path)) {
        (Ok(held), Ok(named)) => held.dev() == named.dev() && held.ino() == named.ino(),
        _ => false,
    }
}

/// Elsewhere a locked file cannot be removed while open: the path names it.
#[cfg(not(unix))]
fn same_file(_file: &File, path: &Path) -> bool {
    path.is_file()
}

/// `Ok` when `path` is a regular file or nothing: a FIFO or a device would block or
/// mislead the open that follows.
pub fn regular_or_missing(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(_) => Err(io::Error::other(format!("{} is not a regular file", path.display()))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// The locks one store value holds, by session, shared by its clones: what a write's
/// claim is checked against.
#[derive(Debug, Clone, Default)]
pub struct Owners(Arc<Mutex<BTreeMap<SessionId, SessionLock>>>);

impl Owners {
    fn held(&self) -> MutexGuard<'_, BTreeMap<SessionId, SessionLock>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `lock` as session `id`'s owner, and its claim.
    pub fn keep(&self, id: &SessionId, lock: SessionLock) -> Claim {
        let claim = Claim::new(id.clone(), lock.token(), None);
        self.held().insert(id.clone(), lock);
        claim
    }

    /// `Ok` when `claim` is the owner this store holds, its lock file still in place;
    /// [`StoreErrorKind::NotOwner`] at `location` otherwise.
    pub fn check(&self, claim: &Claim, location: &str) -> Result<(), StoreError> {
        let held = self.held();
        match held.get(claim.session()) {
            Some(lock) if lock.token() == claim.token() && lock.still_held() => Ok(()),
            Some(lock) if lock.token() == claim.token() => Err(StoreError::new(
                StoreErrorKind::NotOwner,
                location,
                "the session's lock file was removed or replaced: the session is no longer this owner's",
            )),
            _ => Err(StoreError::new(
                StoreErrorKind::NotOwner,
                location,
                format!("claim {} does not own the session (released, or never taken here)", claim.token()),
            )),
        }
    }

    /// Drops `claim`'s lock, if it is the one held.
    pub fn release(&self, claim: &Claim) {
        let mut held = self.held();
        if held.get(claim.session()).is_some_and(|lock| lock.token() == claim.token()) {
            held.remove(claim.session());
        }
    }

    /// Whether this store holds session `id`.
    pub fn holds(&self, id: &SessionId) -> bool {
        self.held().contains_key(id)
    }
}

/// The error for a lock held by another owner.
pub fn owned_elsewhere(location: &str) -> StoreError {
    StoreError::new(StoreErrorKind::OwnedElsewhere, location, "another owner holds the session")
}
