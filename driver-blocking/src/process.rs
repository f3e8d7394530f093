//! MCP servers' child processes on std's process API. The shell reads and writes each
//! pipe from a task of its own, which is a thread here: a pipe's read or write blocks
//! inside its poll, on that thread, as this driver's HTTP exchange does. The pipes end
//! when the child does (the shell's shutdown kills it), which ends their threads.
//!
//! Dropping the control kills a child still running and waits for it: no zombie is
//! left even when the shell's shutdown could not run.

use std::io::{self, Read, Write};
use std::pin::Pin;
use std::process::ExitStatus;
use std::task::{Context, Poll};

use omni_shell::mcp::{take_pipes, ChildProcess, ProcessControl};

/// Starts `command`.
pub(crate) fn spawn(mut command: std::process::Command) -> io::Result<ChildProcess> {
    let mut child = command.spawn()?;
    let (stdin, stdout, stderr) = take_pipes(child.stdin.take(), child.stdout.take(), child.stderr.take())?;
    Ok(ChildProcess {
        stdin: Box::pin(Blocking(stdin)),
        stdout: Box::pin(Blocking(stdout)),
        stderr: Box::pin(Blocking(stderr)),
        control: Box::new(Control(Some(child))),
        blocking: true,
    })
}

struct Control(Option<std::process::Child>);

impl ProcessControl for Control {
    fn id(&self) -> Option<u32> {
        self.0.as_ref().map(std::process::Child::id)
    }

    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        match &mut self.0 {
            Some(child) => {
                let status = child.try_wait()?;
                if status.is_some() {
                    // Reaped: nothing for the drop to do.
                    self.0 = None;
                }
                Ok(status)
            }
            None => Err(io::Error::other("the child was already waited for")),
        }
    }

    fn kill(&mut self) -> io::Result<()> {
        self.0.as_mut().map_or(Ok(()), std::process::Child::kill)
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            if let Ok(None) = child.try_wait() {
                let _ = child.kill();
            }
            // Reaps it (after a kill, at once).
            let _ = child.wait();
        }
    }
}

/// A std pipe as a futures-io stream whose operations block inside the poll.
struct Blocking<T>(T);

impl<T: Read + Unpin> futures_io::AsyncRead for Blocking<T> {
    fn poll_read(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        Poll::Ready(self.0.read(buf))
    }
}

impl<T: Write + Unpin> futures_io::AsyncWrite for Blocking<T> {
    fn poll_write(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Poll::Ready(self.0.write(buf))
    }

    fn poll_flush(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.0.flush())
    }

    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Closing is dropping the pipe, which the shell does next.
        Poll::Ready(Ok(()))
    }
}
