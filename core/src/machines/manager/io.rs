//! What the manager machine takes and gives: the application's requests and the
//! sessions' news in, effects (start or stop a session, a store call, a title request, a
//! batch of lease renewals, an answer) and feed events out.

use std::fmt;
use std::time::{Duration, Instant};

use crate::data::message::{Context, Message};
use crate::machines::agent::Status;
use crate::machines::session::store::{Claim, SessionId, StoreError};

/// A request of the application, numbered by the driver so that its answer finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(pub u64);

/// A title being made by a model, numbered so that a late answer is known as late.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TitleId(pub u64);

/// A batch of lease renewals, numbered likewise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RenewalId(pub u64);

/// How long an idle session without a controller stays open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdleShutdown {
    /// The manager's setting.
    Default,
    /// Closed this long after it became unused.
    After(Duration),
    /// Never closed for being unused.
    Never,
}

/// How an `open` was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    /// The session was started (created, or loaded from the store) by this request.
    Started,
    /// It was running already: the request's session options were not used.
    Existing,
}

/// Why a session stopped running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloseReason {
    /// `close` was asked.
    Closed,
    /// `delete` was asked.
    Deleted,
    /// It had no controller and its agent was idle for the idle shutdown's time.
    Idle,
    /// Its lease in the store was lost (not renewed in time, or taken over): it stopped
    /// here so that it never has two writers.
    LeaseLost(String),
    /// Its loop ended on its own (a failure): why.
    Failed(String),
}

impl CloseReason {
    /// The reason its [`Display`](fmt::Display) wrote (how another node's reason is read
    /// back from a shared store); words it does not know are a failure's.
    pub fn parse(text: &str) -> Self {
        match text {
            "closed" => Self::Closed,
            "deleted" => Self::Deleted,
            "idle" => Self::Idle,
            _ => match (text.strip_prefix("lease lost: "), text.strip_prefix("failed: ")) {
                (Some(why), _) => Self::LeaseLost(why.to_owned()),
                (_, Some(why)) => Self::Failed(why.to_owned()),
                _ => Self::Failed(text.to_owned()),
            },
        }
    }
}

impl fmt::Display for CloseReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Closed => f.write_str("closed"),
            Self::Deleted => f.write_str("deleted"),
            Self::Idle => f.write_str("idle"),
            Self::LeaseLost(why) => write!(f, "lease lost: {why}"),
            Self::Failed(why) => write!(f, "failed: {why}"),
        }
    }
}

/// What a session reports when it has started.
#[derive(Debug, Clone, PartialEq)]
pub struct Started {
    /// Its title.
    pub title: Option<String>,
    /// Its agent's status.
    pub status: Status,
    /// Its controllers at the start (the opener, unless it asked not to be one).
    pub controllers: usize,
    /// The claim it writes with: its lease, when it has one, is renewed by the manager.
    pub claim: Option<Claim>,
    /// When the claim was asked for (the lease runs from no earlier); `None`: when the
    /// `Start` went out.
    pub claimed_at: Option<Instant>,
    /// The first messages of its active path (up to four): a session that starts with a
    /// committed turn and no title gets one from them.
    pub first_messages: Vec<Message>,
}

/// Something the application or a session tells the manager.
#[derive(Debug, Clone, PartialEq)]
pub enum ManagerInput {
    /// Open session `id`: a new one (`create`, refused if it exists or runs), or the one
    /// the store keeps, started if it is not running.
    Open {
        /// The request.
        request: RequestId,
        /// The session.
        id: SessionId,
        /// Create it rather than load it.
        create: bool,
        /// Its idle shutdown (used when this request starts it).
        idle: IdleShutdown,
    },
    /// Close session `id` (idempotent): a turn in flight finishes first.
    Close {
        /// The request.
        request: RequestId,
        /// The session.
        id: SessionId,
    },
    /// Close session `id`, then remove it from the store.
    Delete {
        /// The request.
        request: RequestId,
        /// The session.
        id: SessionId,
    },
    /// Set (or clear) session `id`'s title, running or only stored.
    Rename {
        /// The request.
        request: RequestId,
        /// The session.
        id: SessionId,
        /// The title.
        title: Option<String>,
    },
    /// A session started by [`ManagerEffect::Start`] runs, or could not be started.
    Started {
        /// The session.
        id: SessionId,
        /// What it reports, or why it did not start.
        result: Result<Started, ManagerError>,
    },
    /// A running session's agent changed status.
    Status {
        /// The session.
        id: SessionId,
        /// The status now.
        status: Status,
    },
    /// A running session's controllers changed.
    Controllers {
        /// The session.
        id: SessionId,
        /// How many now.
        count: usize,
    },
    /// A running session committed a turn; its path's first messages (up to four).
    Committed {
        /// The session.
        id: SessionId,
        /// The first messages of its active path.
        first_messages: Vec<Message>,
    },
    /// A running session's title changed (the application set it on the session).
    Titled {
        /// The session.
        id: SessionId,
        /// Its title.
        title: Option<String>,
    },
    /// A title request ([`ManagerEffect::MakeTitle`]) was answered.
    TitleMade {
        /// The session.
        id: SessionId,
        /// The request.
        work: TitleId,
        /// The model's text, or why there is none.
        result: Result<String, String>,
    },
    /// A session's loop ended (after [`ManagerEffect::Stop`], or on its own).
    Ended {
        /// The session.
        id: SessionId,
        /// Why, as the session saw it (closed through one of its handles, say), when the
        /// manager did not ask it to stop.
        reason: Option<CloseReason>,
    },
    /// A store call for a request ([`ManagerEffect::Rename`], [`ManagerEffect::Delete`])
    /// ended: for a delete, whether there was a session.
    StoreDone {
        /// The request.
        request: RequestId,
        /// Its result.
        result: Result<bool, StoreError>,
    },
    /// A batch of renewals ended, one result per claim in order.
    Renewed {
        /// The batch.
        renewal: RenewalId,
        /// The results.
        results: Vec<Result<(), StoreError>>,
    },
}

/// What the manager asks its driver to do.
#[derive(Debug, Clone, PartialEq)]
pub enum ManagerEffect {
    /// Start session `id` (create it in the store, or claim and load it), then report
    /// [`ManagerInput::Started`].
    Start {
        /// The `open` it is started for (whose session options it uses).
        request: RequestId,
        /// The session.
        id: SessionId,
        /// Create it rather than load it.
        create: bool,
    },
    /// Stop running session `id`: its turn in flight is over (or was never), so it writes
    /// what it committed, releases its claim, and ends; then report [`ManagerInput::Ended`].
    Stop {
        /// The session.
        id: SessionId,
        /// Why.
        reason: CloseReason,
    },
    /// Give running session `id` this title (it writes it as its owner).
    SetTitle {
        /// The session.
        id: SessionId,
        /// The title.
        title: Option<String>,
    },
    /// Ask a model for a title; report [`ManagerInput::TitleMade`].
    MakeTitle {
        /// The session.
        id: SessionId,
        /// The request.
        work: TitleId,
        /// What to send (the instruction and the first messages).
        context: Box<Context>,
        /// The longest answer, in tokens.
        max_tokens: u32,
    },
    /// Set the title of session `id`, which does not run here, in the store (claim it,
    /// save its state, release); report [`ManagerInput::StoreDone`].
    Rename {
        /// The request.
        request: RequestId,
        /// The session.
        id: SessionId,
        /// The title.
        title: Option<String>,
    },
    /// Delete session `id` from the store; report [`ManagerInput::StoreDone`].
    Delete {
        /// The request.
        request: RequestId,
        /// The session.
        id: SessionId,
    },
    /// Renew the leases of `claims` in one store call ([`Store::renew_many`]); report
    /// [`ManagerInput::Renewed`].
    ///
    /// [`Store::renew_many`]: crate::machines::session::store::Store::renew_many
    Renew {
        /// The batch.
        renewal: RenewalId,
        /// The claims.
        claims: Vec<Claim>,
    },
    /// Answer request `request`.
    Answer {
        /// The request.
        request: RequestId,
        /// The answer.
        answer: Result<Answer, ManagerError>,
    },
}

/// A request's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// `open`: the session runs.
    Opened(Opening),
    /// `close`: it does not run (any more).
    Closed,
    /// `delete`: whether the store had it.
    Deleted(bool),
    /// `rename`: done.
    Renamed,
}

/// An application's event: what changed among the running sessions, in order per
/// session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FeedEvent {
    /// A session started running.
    Opened {
        /// The session.
        id: SessionId,
        /// Its title.
        title: Option<String>,
        /// Its agent's status.
        status: Status,
    },
    /// A running session's agent changed status.
    Status {
        /// The session.
        id: SessionId,
        /// The status now.
        status: Status,
    },
    /// A session's title changed.
    Title {
        /// The session.
        id: SessionId,
        /// The title now.
        title: Option<String>,
    },
    /// A title could not be made by the model; the heuristic title was used instead.
    TitleFailed {
        /// The session.
        id: SessionId,
        /// Why.
        error: String,
    },
    /// A session stopped running.
    Closed {
        /// The session.
        id: SessionId,
        /// Why.
        reason: CloseReason,
    },
}

impl FeedEvent {
    /// The session it is about.
    pub fn id(&self) -> &SessionId {
        match self {
            Self::Opened { id, .. }
            | Self::Status { id, .. }
            | Self::Title { id, .. }
            | Self::TitleFailed { id, .. }
            | Self::Closed { id, .. } => id,
        }
    }
}

/// A running session as `list_open` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenSession {
    /// The session.
    pub id: SessionId,
    /// The node it runs on, when not this one (a store shared by machines).
    pub node: Option<String>,
    /// Its title.
    pub title: Option<String>,
    /// Its agent's status.
    pub status: Status,
    /// Its controllers (on this node; 0 for another node's).
    pub controllers: usize,
}

/// Why the manager refused a request.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ManagerError {
    /// `create` named a session that runs or is kept already.
    Exists(SessionId),
    /// Another owner holds the session: another node of a shared store (named when the
    /// store knows it), or another process or handle on this machine.
    OwnedElsewhere {
        /// The owner's node.
        node: Option<String>,
    },
    /// The session could not be started: the store's error (not found, corrupt, ...).
    Store(StoreError),
    /// A session's options set what the manager owns: its store, whether it is created
    /// or loaded, its id, or its history (`messages`: a managed session's history is the
    /// store's). Named.
    OwnedOption {
        /// The option.
        option: &'static str,
    },
    /// The session could not be started for another reason (its model, its history).
    Start(String),
    /// As many sessions as the manager allows run already.
    TooMany {
        /// The limit.
        limit: usize,
    },
    /// The manager is shutting down.
    ShuttingDown,
}

impl fmt::Display for ManagerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Exists(id) => write!(f, "session {id} exists already"),
            Self::OwnedElsewhere { node: Some(node) } => write!(f, "node {node} holds the session"),
            Self::OwnedElsewhere { node: None } => f.write_str("another owner holds the session"),
            Self::Store(e) => write!(f, "{e}"),
            Self::OwnedOption { option } => {
                write!(f, "`{option}` is the session manager's to set, not a session's option")
            }
            Self::Start(why) => write!(f, "the session could not be started: {why}"),
            Self::TooMany { limit } => write!(f, "{limit} sessions run already, the most this manager allows"),
            Self::ShuttingDown => f.write_str("the manager is shutting down"),
        }
    }
}

impl std::error::Error for ManagerError {}
