//! What a loop needs from a machine: the generate machine and the agent are driven alike
//! (execute effects, feed what the requests and tools report, wake at the deadline), so
//! the shell's executor feeds both through [`Machine`], the core's contract of every
//! machine (re-exported here; the session and manager loops host theirs in adapters).
//!
//! The loop stays bounded however hostile the server or idle the application: its
//! channels have the capacities below (a full one makes the producer wait: a request
//! stops reading its response, and TCP slows the server down), and it looks at
//! [`Machine::poll_timeout`] before every input, so a flood of input cannot hold off a
//! deadline. One input can make many events (a body chunk of many small SSE events): they
//! wait for the application, bounded by the largest chunk a transport reads
//! ([`BODY_CHUNK`]), not by how long the application leaves the stream unread.

pub use omni_protocol::generate::Report;
pub use omni_protocol::machine::Machine;

/// Room for reports (head, body chunks, end, tool outcomes) between a machine's request
/// and tool tasks and its loop: with body chunks of at most a few hundred KiB, what is
/// read ahead of the machine stays within a few MiB.
pub const INPUT_CAPACITY: usize = 16;
/// The most body a transport reads from its socket and reports at once. Every report
/// costs a hand-off between the transport's task and the loop's (a wake-up, often across
/// threads); 64 KiB holds hundreds of small streamed events, so that cost is spread
/// thin, and [`INPUT_CAPACITY`] of them bound what is read ahead to 1 MiB.
pub const BODY_CHUNK: usize = 64 * 1024;
/// Body buffers a loop keeps for its transport to read into again (see
/// [`BodyBuffers`](crate::runtime::BodyBuffers)). A transport waiting for room in the
/// report channel is woken when half of it is free, and then reads half a channel of
/// pieces in one go (`reports.rs`): that many spares let all of them reuse memory already
/// in use, where a fresh buffer has the kernel fault in and zero new pages. At most
/// 512 KiB per call.
pub const SPARE_BUFFERS: usize = INPUT_CAPACITY / 2;
/// Commands from the application's handles queued for an agent's loop before a handle
/// waits.
pub const COMMAND_CAPACITY: usize = 64;
/// Messages from a session's handles queued for its loop before a handle waits. Fewer
/// than an agent's: a process keeps thousands of sessions open and idle, and a channel's
/// room is allocated when it is made (64 messages would be 7 KiB a session).
pub const SESSION_COMMAND_CAPACITY: usize = 4;
/// Wake-ups (an input, a command, room for events) a loop takes in a row before it yields
/// to its runtime (deadlines are looked at before every input; this keeps a flood from
/// holding a runtime thread).
pub const INPUT_BUDGET: usize = 64;
