//! Tools with async handlers: the core's [`AsyncTool`](omni_core::async_tool::AsyncTool).

pub use omni_core::async_tool::AsyncTool as Tool;

/// A tool's handler as the driver runs it.
pub(crate) type Handler = omni_core::async_tool::AsyncHandler;
