//! Tools with async handlers: the core's [`AsyncTool`](omni_shell::AsyncTool).

pub use omni_shell::AsyncTool as Tool;

/// A tool's handler as the driver runs it.
pub(crate) type Handler = omni_shell::AsyncHandler;
