//! The process's threads as the kernel sees them (the ground truth, not a pool's own count).

/// Threads of this process named `name`, read from /proc (a file per thread: read it
/// sparingly).
pub(crate) fn threads_named(name: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.trim() == name)
        .count()
}
