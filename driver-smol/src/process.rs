//! MCP servers' child processes on smol's process API (async-process): the shell's
//! command converted, its pipes already futures-io streams. `kill_on_drop`: a child
//! whose handle is dropped is killed, and async-process's reaper waits for it, so no
//! zombie is left even when the shell's shutdown could not run.

use std::io;
use std::process::ExitStatus;

use omni_shell::mcp::{take_pipes, ChildProcess, ProcessControl};

/// Starts `command`.
pub(crate) fn spawn(command: std::process::Command) -> io::Result<ChildProcess> {
    let mut command = smol::process::Command::from(command);
    // The conversion keeps the program, arguments, environment, directory and process
    // group, not the pipes: set again here.
    command.stdin(smol::process::Stdio::piped());
    command.stdout(smol::process::Stdio::piped());
    command.stderr(smol::process::Stdio::piped());
    command.kill_on_drop(true);
    let mut child = command.spawn()?;
    let (stdin, stdout, stderr) = take_pipes(child.stdin.take(), child.stdout.take(), child.stderr.take())?;
    Ok(ChildProcess {
        stdin: Box::pin(stdin),
        stdout: Box::pin(stdout),
        stderr: Box::pin(stderr),
        control: Box::new(Control(child)),
        blocking: false,
    })
}

struct Control(smol::process::Child);

impl ProcessControl for Control {
    fn id(&self) -> Option<u32> {
        Some(self.0.id())
    }

    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        self.0.try_status()
    }

    fn kill(&mut self) -> io::Result<()> {
        self.0.kill()
    }
}
