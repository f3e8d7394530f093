//! An MCP server's child process: what a driver starts ([`ChildProcess`], from the
//! command the shell builds), and what the shell does with it, once for every driver:
//! a task that reads stdout in chunks for the loop, one that keeps stderr in a bounded
//! log, one that writes the loop's lines to stdin, and the shutdown (stdin closed, a
//! grace period, then SIGTERM, then SIGKILL, the child reaped).
//!
//! On unix the child leads a process group of its own (the shell's command says so), so
//! the signals reach what it started too (`npx` runs the server as its own child): no
//! process is left behind, and no zombie (the child is waited for).

use std::collections::VecDeque;
use std::fmt;
use std::io;
use std::pin::Pin;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use async_channel::{Receiver, Sender};
use futures_lite::future;
use futures_lite::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use crate::runtime::Runtime;

/// A child process a driver started, its three pipes as futures-io streams.
pub struct ChildProcess {
    /// Its standard input.
    pub stdin: Pin<Box<dyn AsyncWrite + Send>>,
    /// Its standard output.
    pub stdout: Pin<Box<dyn AsyncRead + Send>>,
    /// Its standard error.
    pub stderr: Pin<Box<dyn AsyncRead + Send>>,
    /// Waiting for it and killing it.
    pub control: Box<dyn ProcessControl>,
    /// Its pipes block inside a poll (std's, in omni-blocking): the shell then reads and
    /// writes each from a task of its own. Async pipes (false) are read and written by the
    /// connection's loop itself.
    pub blocking: bool,
}

impl fmt::Debug for ChildProcess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChildProcess").field("id", &self.control.id()).finish_non_exhaustive()
    }
}

/// The three pipes a driver's child was started with (taken from its handle), or an
/// error when one is missing: the one check every driver makes.
pub fn take_pipes<I, O, E>(stdin: Option<I>, stdout: Option<O>, stderr: Option<E>) -> io::Result<(I, O, E)> {
    match (stdin, stdout, stderr) {
        (Some(stdin), Some(stdout), Some(stderr)) => Ok((stdin, stdout, stderr)),
        _ => Err(io::Error::other("a pipe of the child was not set up")),
    }
}

/// What the shell asks of a driver's child handle. Dropping it must not leave a zombie:
/// a driver kills and reaps a child still running then (tokio's and async-process's
/// `kill_on_drop` with their reapers; std's child killed and waited for).
pub trait ProcessControl: Send + 'static {
    /// The process id, while it runs.
    fn id(&self) -> Option<u32>;
    /// Its exit status once it has exited (reaping it), else `None`; never blocks.
    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>>;
    /// Kills it (SIGKILL on unix).
    fn kill(&mut self) -> io::Result<()>;
}

/// The most of the server's stderr kept: the last 64 KiB.
pub const STDERR_LOG_BYTES: usize = 64 * 1024;

/// The size of one read of the server's stdout or stderr.
const READ_CHUNK: usize = 64 * 1024;

/// Chunks of stdout read ahead of the loop: with [`READ_CHUNK`], at most 512 KiB; a
/// full channel stops the reader, and the pipe pushes back on the server.
const STDOUT_AHEAD: usize = 8;

/// The server's stderr, the last [`STDERR_LOG_BYTES`] of it: the server's log, which the
/// application may read; never an error.
#[derive(Debug, Clone, Default)]
pub struct ServerLog(Arc<Mutex<LogBuffer>>);

#[derive(Debug, Default)]
struct LogBuffer {
    bytes: Vec<u8>,
    dropped: u64,
}

impl ServerLog {
    /// Appends `bytes`, dropping the oldest past the bound.
    pub(crate) fn append(&self, bytes: &[u8]) {
        let mut log = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let bytes = &bytes[bytes.len().saturating_sub(STDERR_LOG_BYTES)..];
        let over = (log.bytes.len() + bytes.len()).saturating_sub(STDERR_LOG_BYTES);
        if over > 0 {
            log.bytes.drain(..over);
            log.dropped += over as u64;
        }
        log.bytes.extend_from_slice(bytes);
    }

    /// What is kept, lossily decoded.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(PoisonError::into_inner).bytes).into_owned()
    }

    /// How many older bytes were dropped to keep the bound.
    pub fn dropped(&self) -> u64 {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).dropped
    }
}

/// What the child's stdout gave.
#[derive(Debug)]
pub(crate) enum Stdout {
    Bytes(Vec<u8>),
    /// End of file, or a read or write that failed: either way no more will come.
    Closed,
}

/// A running child's pipes, as the loop uses them, and what stops it.
pub(crate) struct Stdio {
    pipes: Pipes,
    pub(crate) control: Option<Box<dyn ProcessControl>>,
    /// The tasks reading stderr (and, for pipes that block, the other two): dropping
    /// them stops them (they end by themselves once the child is gone).
    tasks: Vec<Box<dyn Send>>,
}

enum Pipes {
    /// Pipes that block inside a poll (omni-blocking's): read and written by tasks of
    /// their own, which hand the loop their chunks and take its lines over channels.
    Tasks { stdin: Option<Sender<Vec<u8>>>, stdout: Receiver<Stdout> },
    /// Async pipes (tokio's, async-process's): read and written by the loop itself, with
    /// no hand-off between tasks on the way.
    Direct(Box<Direct>),
}

struct Direct {
    stdin: Option<Pin<Box<dyn AsyncWrite + Send>>>,
    /// Lines not yet written, the first one `written` bytes in.
    outbox: VecDeque<Vec<u8>>,
    written: usize,
    flushed: bool,
    /// The most lines waiting.
    limit: usize,
    stdout: Pin<Box<dyn AsyncRead + Send>>,
    /// The buffer the next read goes into (given back by the loop once decoded).
    buffer: Vec<u8>,
}

impl fmt::Debug for Stdio {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stdio").field("tasks", &self.tasks.len()).finish_non_exhaustive()
    }
}

/// Starts the tasks around `child`: stderr to `log` always; for pipes that block, stdout
/// to the loop and the loop's lines to stdin too. `lines` bounds the lines waiting for
/// stdin (the loop treats a full queue as a server that no longer reads).
pub(crate) fn attach<R: Runtime>(
    runtime: &R,
    child: ChildProcess,
    log: ServerLog,
    lines: usize,
) -> Result<Stdio, crate::Error> {
    let ChildProcess { stdin, stdout, stderr, control, blocking } = child;
    let mut tasks: Vec<Box<dyn Send>> = vec![Box::new(runtime.spawn(read_stderr(stderr, log))?)];
    let pipes = if blocking {
        let (to_loop, from_child) = async_channel::bounded(STDOUT_AHEAD);
        let (to_child, for_stdin) = async_channel::bounded(lines);
        tasks.push(Box::new(runtime.spawn(read_stdout(stdout, to_loop))?));
        tasks.push(Box::new(runtime.spawn(write_stdin(stdin, for_stdin))?));
        Pipes::Tasks { stdin: Some(to_child), stdout: from_child }
    } else {
        Pipes::Direct(Box::new(Direct {
            stdin: Some(stdin),
            outbox: VecDeque::new(),
            written: 0,
            flushed: true,
            limit: lines,
            stdout,
            buffer: Vec::new(),
        }))
    };
    Ok(Stdio { pipes, control: Some(control), tasks })
}

impl Stdio {
    /// Queues `line` for stdin; false when the server takes no more (the queue is full:
    /// it stopped reading; or a write failed: it is gone).
    pub(crate) fn send(&mut self, line: Vec<u8>) -> bool {
        match &mut self.pipes {
            Pipes::Tasks { stdin, .. } => stdin.as_ref().is_some_and(|stdin| stdin.try_send(line).is_ok()),
            Pipes::Direct(direct) => {
                if direct.stdin.is_none() || direct.outbox.len() >= direct.limit {
                    return false;
                }
                direct.outbox.push_back(line);
                true
            }
        }
    }

    /// Closes stdin: the first step of the shutdown.
    pub(crate) fn close_stdin(&mut self) {
        match &mut self.pipes {
            Pipes::Tasks { stdin, .. } => *stdin = None,
            Pipes::Direct(direct) => direct.stdin = None,
        }
    }

    /// The next output, writing the queued lines meanwhile. Cancel-safe.
    pub(crate) async fn next(&mut self) -> Stdout {
        match &mut self.pipes {
            Pipes::Tasks { stdout, .. } => stdout.recv().await.unwrap_or(Stdout::Closed),
            Pipes::Direct(direct) => future::poll_fn(|cx| direct.poll_next(cx)).await,
        }
    }

    /// Gives a chunk's buffer back for the next read, once decoded.
    pub(crate) fn recycle(&mut self, buffer: Vec<u8>) {
        if let Pipes::Direct(direct) = &mut self.pipes {
            direct.buffer = buffer;
        }
    }
}

impl Direct {
    fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Stdout> {
        if self.poll_write(cx).is_err() {
            return Poll::Ready(Stdout::Closed);
        }
        // Only the part never written is zeroed (a recycled buffer keeps its bytes).
        self.buffer.resize(READ_CHUNK, 0);
        match self.stdout.as_mut().poll_read(cx, &mut self.buffer) {
            Poll::Ready(Ok(0) | Err(_)) => Poll::Ready(Stdout::Closed),
            Poll::Ready(Ok(n)) => {
                let mut chunk = std::mem::take(&mut self.buffer);
                chunk.truncate(n);
                Poll::Ready(Stdout::Bytes(chunk))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    /// Writes what it can of the queued lines; an error when the child no longer takes
    /// them.
    fn poll_write(&mut self, cx: &mut Context<'_>) -> Result<(), ()> {
        let Some(stdin) = self.stdin.as_mut() else { return Ok(()) };
        while let Some(front) = self.outbox.front() {
            match stdin.as_mut().poll_write(cx, &front[self.written..]) {
                Poll::Ready(Ok(0) | Err(_)) => {
                    self.stdin = None;
                    return Err(());
                }
                Poll::Ready(Ok(n)) => {
                    self.written += n;
                    self.flushed = false;
                    if self.written == front.len() {
                        self.outbox.pop_front();
                        self.written = 0;
                    }
                }
                Poll::Pending => return Ok(()),
            }
        }
        if !self.flushed {
            match stdin.as_mut().poll_flush(cx) {
                Poll::Ready(Ok(())) => self.flushed = true,
                Poll::Ready(Err(_)) => {
                    self.stdin = None;
                    return Err(());
                }
                Poll::Pending => {}
            }
        }
        Ok(())
    }
}

async fn read_stdout(mut stdout: Pin<Box<dyn AsyncRead + Send>>, to_loop: Sender<Stdout>) {
    loop {
        let mut buffer = vec![0; READ_CHUNK];
        match stdout.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                buffer.truncate(n);
                if to_loop.send(Stdout::Bytes(buffer)).await.is_err() {
                    return;
                }
            }
        }
    }
    let _ = to_loop.send(Stdout::Closed).await;
}

async fn read_stderr(mut stderr: Pin<Box<dyn AsyncRead + Send>>, log: ServerLog) {
    let mut buffer = vec![0; READ_CHUNK];
    while let Ok(n @ 1..) = stderr.read(&mut buffer).await {
        log.append(&buffer[..n]);
    }
}

/// Writes each line in order; ends (closing stdin) when the loop drops its sender, or
/// when a write fails (the child is gone), which the loop learns as a closed queue.
async fn write_stdin(mut stdin: Pin<Box<dyn AsyncWrite + Send>>, lines: Receiver<Vec<u8>>) {
    while let Ok(line) = lines.recv().await {
        if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
            return;
        }
    }
    let _ = stdin.close().await;
}

/// How long shutdown waits at each stage (after closing stdin, after SIGTERM).
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// Ends the child as the spec's stdio shutdown says: stdin is closed already (its sender
/// dropped); wait up to `grace` for it to exit, then SIGTERM, wait again, then SIGKILL,
/// and reap it. What it started in its process group goes too.
pub(crate) async fn shut_down<R: Runtime>(runtime: R, mut control: Box<dyn ProcessControl>, grace: Duration) {
    let group = control.id();
    for signal in [None, Some(Signal::Terminate), Some(Signal::Kill)] {
        match signal {
            None => {}
            Some(Signal::Terminate) => signal_group(group, Signal::Terminate),
            Some(Signal::Kill) => {
                signal_group(group, Signal::Kill);
                let _ = control.kill();
            }
        }
        if exited_within(&runtime, &mut *control, grace).await {
            // Whatever it left in its group goes too (its group id cannot be reused
            // while a member lives, so this reaches only those).
            signal_group(group, Signal::Kill);
            return;
        }
    }
    // Killed and still not reaped after the grace (the kernel is slow, or the driver's
    // handle cannot wait): the driver's drop reaps it.
}

/// Polls for the child's exit until `grace` has passed (shutdown is rare; a poll every
/// few milliseconds costs nothing, and works alike for every driver's child).
async fn exited_within<R: Runtime>(runtime: &R, control: &mut dyn ProcessControl, grace: Duration) -> bool {
    let start = runtime.now();
    let mut pause = Duration::from_millis(1);
    loop {
        match control.try_wait() {
            Ok(Some(_)) | Err(_) => return true,
            Ok(None) => {}
        }
        let now = runtime.now();
        if now.duration_since(start) >= grace {
            return false;
        }
        runtime.sleep_until(now + pause).await;
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

#[derive(Debug, Clone, Copy)]
enum Signal {
    Terminate,
    Kill,
}

/// Sends `signal` to the process group the child leads (unix; elsewhere the child's own
/// kill is all there is).
#[cfg(unix)]
fn signal_group(group: Option<u32>, signal: Signal) {
    use rustix::process::{kill_process_group, Pid, Signal as Sig};
    let Some(pid) = group.and_then(|id| i32::try_from(id).ok()).and_then(Pid::from_raw) else { return };
    let signal = match signal {
        Signal::Terminate => Sig::TERM,
        Signal::Kill => Sig::KILL,
    };
    // ESRCH: nothing is left in the group.
    let _ = kill_process_group(pid, signal);
}

#[cfg(not(unix))]
fn signal_group(_group: Option<u32>, _signal: Signal) {}

/// The command the shell gives a driver to start: the application's program, arguments,
/// environment and directory, with the three pipes, and (unix) a process group of its own.
pub(crate) fn command(spec: &StdioCommand) -> std::process::Command {
    let mut command = std::process::Command::new(&spec.program);
    command.args(&spec.args);
    if spec.clear_env {
        command.env_clear();
    }
    for (key, value) in &spec.env {
        command.env(key, value);
    }
    if let Some(dir) = &spec.current_dir {
        command.current_dir(dir);
    }
    command.stdin(std::process::Stdio::piped());
    command.stdout(std::process::Stdio::piped());
    command.stderr(std::process::Stdio::piped());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        command.process_group(0);
    }
    command
}

/// How to start a stdio server.
#[derive(Clone, Default)]
pub(crate) struct StdioCommand {
    pub(crate) program: std::ffi::OsString,
    pub(crate) args: Vec<std::ffi::OsString>,
    pub(crate) env: Vec<(std::ffi::OsString, std::ffi::OsString)>,
    pub(crate) clear_env: bool,
    pub(crate) current_dir: Option<std::path::PathBuf>,
}

impl fmt::Debug for StdioCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The environment may hold the server's credentials: only its names are shown.
        let env: Vec<_> = self.env.iter().map(|(key, _)| key).collect();
        f.debug_struct("StdioCommand")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env", &env)
            .field("clear_env", &self.clear_env)
            .field("current_dir", &self.current_dir)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_keeps_the_last_bytes_within_its_bound() {
        let log = ServerLog::default();
        log.append(b"first\n");
        log.append(&vec![b'x'; STDERR_LOG_BYTES]);
        log.append(b"last\n");
        let text = log.text();
        assert_eq!(text.len(), STDERR_LOG_BYTES);
        assert!(text.ends_with("x\nlast\n") || text.ends_with("xlast\n"), "{}", &text[text.len() - 10..]);
        assert_eq!(log.dropped(), 6 + 5);
        // One append larger than the bound keeps its end.
        let big = ServerLog::default();
        let mut bytes = vec![b'a'; STDERR_LOG_BYTES];
        bytes.extend_from_slice(b"tail");
        big.append(&bytes);
        assert!(big.text().ends_with("tail"));
        assert_eq!(big.text().len(), STDERR_LOG_BYTES);
    }

    #[test]
    fn the_commands_debug_shows_no_environment_value() {
        let spec = StdioCommand {
            program: "server".into(),
            env: vec![("API_TOKEN".into(), "s3cret-value".into())],
            ..StdioCommand::default()
        };
        let shown = format!("{spec:?}");
        assert!(shown.contains("API_TOKEN") && !shown.contains("s3cret-value"), "{shown}");
    }
}
