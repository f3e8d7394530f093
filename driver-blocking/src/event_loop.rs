//! The driver loop: the generate machine on its own thread, executing its effects
//! with threads and delivering its events through a channel.
//!
//! ```text
//!  request threads ──┐                                  ┌──► events channel ──► TextStream (Iterator)
//!  tool threads ─────┼─► inputs channel ─► machine loop ┤
//!  TextStream (cancel, drop) ─┘   recv_timeout(deadline) └──► effects: start/cancel requests and tools
//! ```
//!
//! Waiting for "the next input or the next deadline" is `recv_timeout` on the inputs
//! channel. The loop holds a sender of its own inputs channel (to hand to the threads
//! it starts), so the channel never disconnects while it runs; the application's
//! cancel arrives as an input, and a dropped stream shows as a failed event send.

use std::collections::BTreeMap;
use std::io;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread;
use std::time::Instant;

use omni_core::generate::{
    Effect, Generate, GenerateEvent, Input, RequestId, ToolOutcome, ToolRunId, TransportError, TransportErrorKind,
};

use crate::tools::{CancelToken, Tool};
use crate::transport::{Http, HttpEvent, RequestHandle};

/// What the loop waits for.
#[derive(Debug)]
pub(crate) enum LoopInput {
    /// Progress of a request.
    Http { id: RequestId, event: HttpEvent },
    /// A tool run ended.
    Tool { id: ToolRunId, outcome: ToolOutcome },
    /// The application cancels the call.
    Cancel,
}

/// The tools of one call, by name.
pub(crate) type ToolSet = Arc<BTreeMap<String, Tool>>;

/// Starts the loop on its own thread: returns the events receiver and a sender for
/// the application's cancel.
pub(crate) fn spawn(
    machine: Generate,
    http: Http,
    tools: ToolSet,
) -> io::Result<(Receiver<GenerateEvent>, Sender<LoopInput>)> {
    let (input_tx, input_rx) = mpsc::channel();
    let (event_tx, event_rx) = mpsc::channel();
    let driver = Driver {
        machine,
        inputs: input_rx,
        input_tx: input_tx.clone(),
        events: event_tx,
        http,
        tools,
        requests: BTreeMap::new(),
        runs: BTreeMap::new(),
    };
    thread::Builder::new().name("omni-generate".into()).spawn(move || driver.run())?;
    Ok((event_rx, input_tx))
}

struct Driver {
    machine: Generate,
    inputs: Receiver<LoopInput>,
    /// Cloned into every request and tool thread.
    input_tx: Sender<LoopInput>,
    events: Sender<GenerateEvent>,
    http: Http,
    tools: ToolSet,
    requests: BTreeMap<RequestId, RequestHandle>,
    runs: BTreeMap<ToolRunId, CancelToken>,
}

impl Driver {
    fn run(mut self) {
        let mut app_gone = false;
        loop {
            while let Some(effect) = self.machine.poll_effect() {
                self.execute(effect);
            }
            while let Some(event) = self.machine.poll_event() {
                // A failed send means the TextStream is gone: cancel below.
                app_gone = app_gone || self.events.send(event).is_err();
            }
            if self.machine.is_done() {
                break;
            }
            let now = Instant::now();
            if app_gone {
                self.machine.handle_input(Input::Cancel, now);
                continue;
            }
            let deadline = self.machine.poll_timeout();
            // A deadline that passed while inputs kept arriving fires before the next
            // input, so a steady trickle of keep-alives cannot hold off a stall.
            if deadline.is_some_and(|d| d <= now) {
                self.machine.handle_timeout(now);
                continue;
            }
            let input = match deadline {
                Some(deadline) => match self.inputs.recv_timeout(deadline.saturating_duration_since(now)) {
                    Ok(input) => Some(input),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => break,
                },
                None => match self.inputs.recv() {
                    Ok(input) => Some(input),
                    Err(_) => break,
                },
            };
            let now = Instant::now();
            match input {
                Some(input) => self.feed(input, now),
                None => self.machine.handle_timeout(now),
            }
        }
        // The machine cancels what it started before it finishes; this catches
        // anything left (a loop that ended otherwise).
        for (_, request) in std::mem::take(&mut self.requests) {
            request.cancel();
        }
        for (_, token) in std::mem::take(&mut self.runs) {
            token.cancel();
        }
    }

    fn feed(&mut self, input: LoopInput, now: Instant) {
        match input {
            LoopInput::Http { id, event } => match event {
                HttpEvent::Head { status, headers } => {
                    self.machine.handle_input(Input::ResponseHead { id, status, headers }, now)
                }
                HttpEvent::Body(bytes) => self.machine.handle_input(Input::Body { id, bytes: &bytes }, now),
                HttpEvent::End => {
                    self.requests.remove(&id);
                    self.machine.handle_input(Input::BodyEnd { id }, now);
                }
                HttpEvent::Failed(error) => {
                    self.requests.remove(&id);
                    self.machine.handle_input(Input::TransportFailed { id, error }, now);
                }
            },
            LoopInput::Tool { id, outcome } => {
                self.runs.remove(&id);
                self.machine.handle_input(Input::ToolFinished { id, outcome }, now);
            }
            LoopInput::Cancel => self.machine.handle_input(Input::Cancel, now),
        }
    }

    fn execute(&mut self, effect: Effect) {
        match effect {
            Effect::SendRequest { id, request } => {
                let tx = self.input_tx.clone();
                match self.http.start(request, move |event| tx.send(LoopInput::Http { id, event }).is_ok()) {
                    Ok(handle) => {
                        self.requests.insert(id, handle);
                    }
                    Err(e) => {
                        let error = TransportError {
                            kind: TransportErrorKind::Other,
                            message: format!("could not start the request thread: {e}"),
                        };
                        self.machine.handle_input(Input::TransportFailed { id, error }, Instant::now());
                    }
                }
            }
            Effect::CancelRequest { id } => {
                if let Some(request) = self.requests.remove(&id) {
                    request.cancel();
                }
            }
            Effect::RunTool { id, call } => {
                let token = CancelToken::default();
                let started = match self.tools.get(&call.name) {
                    Some(tool) => {
                        let tx = self.input_tx.clone();
                        tool.spawn(call.input, token.clone(), move |outcome| {
                            // The loop may be gone (call over): nobody needs the answer.
                            let _ = tx.send(LoopInput::Tool { id, outcome });
                        })
                        .map_err(|e| format!("could not start the tool thread: {e}"))
                    }
                    None => Err(format!("tool {:?} has no handler", call.name)),
                };
                match started {
                    Ok(()) => {
                        self.runs.insert(id, token);
                    }
                    Err(message) => self
                        .machine
                        .handle_input(Input::ToolFinished { id, outcome: ToolOutcome::Err(message) }, Instant::now()),
                }
            }
            Effect::CancelTool { id } => {
                if let Some(token) = self.runs.remove(&id) {
                    token.cancel();
                }
            }
        }
    }
}
