//! The application's side of a call: an iterator over its events.

use std::fmt;

use async_channel::{Receiver, Sender};
use omni_core::generate::{GenerateError, GenerateEvent};
use omni_core::Response;

use crate::Error;

/// The events of one call, as they happen: text and tool-call deltas of each step,
/// retries, tool results, then exactly one `Finished` or `Failed`, after which the
/// iterator ends. `next` blocks until the next event.
///
/// Dropping the stream cancels the call: the request in flight is aborted (its
/// connection closed) and running tools are cancelled.
///
/// Events wait in a bounded queue: while the application does not read, the call stops
/// reading the response (the server is slowed by TCP), but its deadlines still fire, and
/// the last event (`Finished` or `Failed`) comes whenever the application reads again.
pub struct TextStream {
    events: Receiver<GenerateEvent>,
    /// Closed to cancel the call (the shell's call loop then cancels the machine).
    control: Sender<()>,
    /// The terminal event, kept once seen so [`TextStream::response`] still works
    /// after the caller iterated to the end.
    outcome: Option<Result<Response, (GenerateError, Response)>>,
}

impl fmt::Debug for TextStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TextStream").field("ended", &self.outcome.is_some()).finish_non_exhaustive()
    }
}

impl TextStream {
    pub(crate) fn new(events: Receiver<GenerateEvent>, control: Sender<()>) -> Self {
        Self { events, control, outcome: None }
    }

    /// Cancels the call but keeps the stream: the remaining events end with
    /// `Finished` whose stop reason is `cancelled`.
    pub fn cancel(&self) {
        self.cancel_handle().cancel();
    }

    /// A handle that cancels this call from another thread.
    pub fn cancel_handle(&self) -> CancelHandle {
        CancelHandle { control: self.control.clone() }
    }

    /// Reads the rest of the stream and returns the final response, or the error with
    /// everything received until then.
    pub fn response(mut self) -> Result<Response, Error> {
        while self.next().is_some() {}
        match self.outcome.take() {
            Some(Ok(response)) => Ok(response),
            Some(Err((error, partial))) => Err(Error::Generate { error, partial: Box::new(partial) }),
            None => Err(Error::Setup("the generate loop stopped without finishing the call".into())),
        }
    }
}

impl Iterator for TextStream {
    type Item = GenerateEvent;

    fn next(&mut self) -> Option<GenerateEvent> {
        let event = self.events.recv_blocking().ok()?;
        match &event {
            GenerateEvent::Finished(response) => self.outcome = Some(Ok((**response).clone())),
            GenerateEvent::Failed { error, partial } => self.outcome = Some(Err((error.clone(), (**partial).clone()))),
            _ => {}
        }
        Some(event)
    }
}

impl Drop for TextStream {
    fn drop(&mut self) {
        // Never waits; a call already over needs none. (The loop also sees the events'
        // receiver go.)
        self.control.close();
    }
}

/// Cancels a call from any thread; cheap to clone. Cancelling a finished call does
/// nothing.
#[derive(Clone)]
pub struct CancelHandle {
    control: Sender<()>,
}

impl fmt::Debug for CancelHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CancelHandle").finish_non_exhaustive()
    }
}

impl CancelHandle {
    /// Cancels the call. Never waits; cancelling twice, or a call already over, does
    /// nothing more.
    pub fn cancel(&self) {
        self.control.close();
    }
}
