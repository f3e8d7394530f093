//! Waiting for a child process and taking the kernel's account of its CPU time.

use std::io;
use std::time::Duration;

/// How a child ended, and the CPU it used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    /// True when it exited with status 0.
    pub success: bool,
    /// The raw wait status (exit code or signal), for messages.
    pub status: i32,
    /// User plus system CPU time of the whole process: every thread, from `exec` to exit.
    pub cpu: Duration,
    /// Peak resident set size of the process (`ru_maxrss`), KiB.
    pub max_rss_kb: u64,
}

/// Waits for the child `pid` to end and reaps it (`wait4`), returning its CPU time and
/// peak resident set size.
///
/// Why `wait4` rather than the child calling `getrusage(RUSAGE_SELF)` before it exits:
/// the kernel's account covers everything the process did (loader, runtime start,
/// every thread, teardown after `main`), the client binary carries no measuring code,
/// and no client can report for itself. std reaps children with `waitpid`, which drops
/// this account, so `libc::wait4` is called directly; the caller must not also wait for
/// `pid` through `std::process::Child`.
// `wait4` is a foreign function (as is `clock_gettime` in `thread_cpu`).
#[allow(unsafe_code)]
pub fn wait(pid: u32) -> io::Result<Exit> {
    let pid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
    let mut status: libc::c_int = 0;
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: `status` and `usage` are valid, writable, and live across the call.
        let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
        if reaped == pid {
            break;
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
    let time = |t: libc::timeval| {
        Duration::from_secs(u64::try_from(t.tv_sec).unwrap_or(0))
            + Duration::from_micros(u64::try_from(t.tv_usec).unwrap_or(0))
    };
    let success = libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0;
    let max_rss_kb = u64::try_from(usage.ru_maxrss).unwrap_or(0);
    Ok(Exit { success, status, cpu: time(usage.ru_utime) + time(usage.ru_stime), max_rss_kb })
}

/// The CPU time (user + system) the calling thread has used so far
/// (`CLOCK_THREAD_CPUTIME_ID`): what work that all runs on this thread (a current-thread
/// runtime) costs, without the loopback server's thread beside it. Zero if the clock
/// cannot be read.
// `clock_gettime` is a foreign function.
#[allow(unsafe_code)]
pub fn thread_cpu() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is valid and writable for the call.
    if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) } != 0 {
        return Duration::ZERO;
    }
    Duration::from_secs(u64::try_from(now.tv_sec).unwrap_or(0))
        + Duration::from_nanos(u64::try_from(now.tv_nsec).unwrap_or(0))
}
