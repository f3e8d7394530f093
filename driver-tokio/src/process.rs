//! MCP servers' child processes on tokio's process API: the shell's command converted to
//! tokio's, its pipes adapted to the futures-io traits the shell reads and writes.
//! `kill_on_drop`: a child whose handle is dropped is killed, and tokio's reaper waits
//! for it, so no zombie is left even when the shell's shutdown could not run.

use std::io;
use std::pin::Pin;
use std::process::ExitStatus;
use std::task::{Context, Poll};

use omni_shell::mcp::{take_pipes, ChildProcess, ProcessControl};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Starts `command` on the current tokio runtime.
pub(crate) fn spawn(command: std::process::Command) -> io::Result<ChildProcess> {
    let mut command = tokio::process::Command::from(command);
    command.kill_on_drop(true);
    let mut child = command.spawn()?;
    let (stdin, stdout, stderr) = take_pipes(child.stdin.take(), child.stdout.take(), child.stderr.take())?;
    Ok(ChildProcess {
        stdin: Box::pin(Compat(stdin)),
        stdout: Box::pin(Compat(stdout)),
        stderr: Box::pin(Compat(stderr)),
        control: Box::new(Control(child)),
        blocking: false,
    })
}

struct Control(tokio::process::Child);

impl ProcessControl for Control {
    fn id(&self) -> Option<u32> {
        self.0.id()
    }

    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.0.try_wait()
    }

    fn kill(&mut self) -> io::Result<()> {
        self.0.start_kill()
    }
}

/// A tokio pipe as a futures-io stream.
struct Compat<T>(T);

impl<T: AsyncRead + Unpin> futures_io::AsyncRead for Compat<T> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let mut buf = ReadBuf::new(buf);
        match Pin::new(&mut self.0).poll_read(cx, &mut buf) {
            Poll::Ready(Ok(())) => Poll::Ready(Ok(buf.filled().len())),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<T: AsyncWrite + Unpin> futures_io::AsyncWrite for Compat<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}
