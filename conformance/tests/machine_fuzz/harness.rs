//! The harness: applies a transition, drains effects and events, checks the invariants.

use std::time::{Duration, Instant};

use omni_protocol::generate::{Report, RequestId, ToolOutcome, ToolRunId, TransportError, TransportErrorKind};
use omni_protocol::ToolResultContent;

use crate::reference::{Ledger, Request};
use crate::subjects::Subject;
use crate::transition::{stream_bodies, Step, ERROR_BODY};

pub(crate) struct Harness<S> {
    subject: S,
    ledger: Ledger,
    bodies: Vec<Vec<u8>>,
    start: Instant,
    now: Instant,
}

fn kind(n: u8) -> TransportErrorKind {
    match n % 5 {
        0 => TransportErrorKind::Connect,
        1 => TransportErrorKind::Reset,
        2 => TransportErrorKind::Tls,
        3 => TransportErrorKind::ProxyAuth,
        _ => TransportErrorKind::Other,
    }
}

fn outcome(n: u8) -> ToolOutcome {
    match n % 3 {
        0 => ToolOutcome::Ok(vec![ToolResultContent::Text { text: format!("result {n}") }]),
        1 => ToolOutcome::Err(format!("error {n}")),
        _ => ToolOutcome::Panicked(format!("panic {n}")),
    }
}

impl<S: Subject> Harness<S> {
    pub(crate) fn new(subject: S, start: Instant) -> Self {
        Self { subject, ledger: Ledger::default(), bodies: stream_bodies(), start, now: start }
    }

    /// Drains effects and events, then checks the invariants.
    fn settle(&mut self) -> Result<(), String> {
        while let Some(effect) = self.subject.poll_effect() {
            self.ledger.telemetry.effect(&effect, S::TURNS)?;
            self.ledger.effect(effect)?;
        }
        self.subject.drain_events()?;
        if self.subject.at_rest() || self.subject.paused() {
            self.ledger.all_settled()?;
            self.ledger.telemetry.settled(self.subject.paused())?;
        }
        // One exchange at a time: a retry, a redirect or the next step starts only once the
        // request before it is settled.
        let open: Vec<u64> = self.ledger.requests.iter().filter(|(_, r)| !r.settled()).map(|(id, _)| id.0).collect();
        if open.len() > 1 {
            return Err(format!("requests {open:?} in flight at once"));
        }
        Ok(())
    }

    fn apply(&mut self, step: &Step) -> Result<(), String> {
        let now = self.now;
        match step {
            Step::Head { pick, status, retry_after, body } => {
                let Some(id) = Ledger::nth(&self.ledger.requests, *pick, |r| r.open() && r.body.is_none()) else {
                    return Ok(());
                };
                let mut headers = vec![("content-type".to_string(), "text/event-stream".to_string())];
                if let Some((name, value)) = retry_after {
                    headers.push((name.to_string(), value.to_string()));
                }
                if (300..400).contains(status) {
                    // Followed when on the same origin (a new request), refused when not.
                    let location = if body % 2 == 0 { "/v1/elsewhere" } else { "http://other.invalid/v1" };
                    headers.push(("location".into(), location.into()));
                }
                let request = self.ledger.requests.get_mut(&id).expect("picked");
                request.stream = *status == 200;
                request.body = Some(if request.stream {
                    self.bodies[body % self.bodies.len()].clone()
                } else {
                    ERROR_BODY.to_vec()
                });
                self.subject.report(Report::ResponseHead { id, status: *status, headers }, now);
            }
            Step::Reply { pick, body } => {
                let head = Step::Head { pick: *pick, status: 200, retry_after: None, body: *body };
                self.apply(&head)?;
                let Some(id) = Ledger::nth(&self.ledger.requests, 0, |r| r.open() && r.body.is_some() && r.sent == 0)
                else {
                    return Ok(());
                };
                let request = self.ledger.requests.get_mut(&id).expect("picked");
                let bytes = request.body.clone().unwrap_or_default();
                request.sent = bytes.len();
                self.subject.report(Report::Body { id, bytes: &bytes }, now);
                self.settle()?;
                self.deadline_not_past(false)?;
                if self.ledger.requests.get(&id).is_some_and(Request::open) {
                    self.ledger.requests.get_mut(&id).expect("picked").answered = true;
                    self.subject.report(Report::BodyEnd { id }, now);
                }
            }
            Step::Body { pick, len } => {
                let Some(id) = Ledger::nth(&self.ledger.requests, *pick, |r| {
                    r.open() && r.body.as_ref().is_some_and(|b| r.sent < b.len())
                }) else {
                    return Ok(());
                };
                let request = self.ledger.requests.get_mut(&id).expect("picked");
                let body = request.body.as_deref().unwrap_or_default();
                let end = request.sent.saturating_add(*len).min(body.len());
                let bytes = body[request.sent..end].to_vec();
                request.sent = end;
                self.subject.report(Report::Body { id, bytes: &bytes }, now);
            }
            Step::Garbage { pick, bytes } => {
                let Some(id) = Ledger::nth(&self.ledger.requests, *pick, |r| r.open() && r.body.is_some()) else {
                    return Ok(());
                };
                self.ledger.requests.get_mut(&id).expect("picked").spoiled = true;
                self.subject.report(Report::Body { id, bytes }, now);
            }
            Step::End { pick } => {
                let Some(id) = Ledger::nth(&self.ledger.requests, *pick, |r| r.open() && r.body.is_some()) else {
                    return Ok(());
                };
                self.ledger.requests.get_mut(&id).expect("picked").answered = true;
                self.subject.report(Report::BodyEnd { id }, now);
            }
            Step::Fail { pick, kind: n } => {
                let Some(id) = Ledger::nth(&self.ledger.requests, *pick, Request::open) else { return Ok(()) };
                self.ledger.requests.get_mut(&id).expect("picked").answered = true;
                let error = TransportError { kind: kind(*n), message: "fuzzed".into() };
                self.subject.report(Report::TransportFailed { id, error }, now);
            }
            Step::ToolDone { pick, outcome: n } => {
                let Some(id) = Ledger::nth(&self.ledger.tools, *pick, |t| !t.answered && !t.cancelled) else {
                    return Ok(());
                };
                self.ledger.tools.get_mut(&id).expect("picked").answered = true;
                self.subject.report(Report::ToolFinished { id, outcome: outcome(*n) }, now);
            }
            Step::Stale { pick, what } => return self.stale(*pick, *what),
            Step::Cancel | Step::Prompt(_) | Step::Resume(_) | Step::SetState(_) | Step::Terminate => {
                let before = self.subject.event_count();
                if !self.subject.application(step, now) {
                    // A refused input changes nothing.
                    if let Some(effect) = self.subject.poll_effect() {
                        return Err(format!("a refused {step:?} made an effect: {effect:?}"));
                    }
                    self.subject.drain_events()?;
                    if self.subject.event_count() != before {
                        return Err(format!("a refused {step:?} made events"));
                    }
                }
            }
            Step::Tick(ms) => {
                self.now += Duration::from_millis(u64::from(*ms));
                return self.timeout();
            }
            Step::ToDeadline(ms) => {
                if let Some(deadline) = self.subject.poll_timeout() {
                    // Time never goes back, even when the deadline is (wrongly) in the past.
                    self.now = self.now.max(deadline + Duration::from_millis(u64::from(*ms)));
                }
                return self.timeout();
            }
        }
        self.settle()?;
        self.deadline_not_past(false)
    }

    fn timeout(&mut self) -> Result<(), String> {
        self.subject.handle_timeout(self.now);
        self.settle()?;
        self.deadline_not_past(true)
    }

    /// Property 4: after `handle_timeout(now)` the deadline is none or later than `now`;
    /// after any other input it is not in the past.
    fn deadline_not_past(&self, after_timeout: bool) -> Result<(), String> {
        match self.subject.poll_timeout() {
            Some(d) if d < self.now || (after_timeout && d == self.now) => Err(format!(
                "deadline at {:?} is not after now {:?} ({})",
                d.saturating_duration_since(self.start),
                self.now.saturating_duration_since(self.start),
                if after_timeout { "after handle_timeout" } else { "after an input" }
            )),
            _ => Ok(()),
        }
    }

    /// A report for a settled or unknown id: no effect, no event, same deadline.
    fn stale(&mut self, pick: usize, what: u8) -> Result<(), String> {
        let settled_request = Ledger::nth(&self.ledger.requests, pick, |r| !r.open());
        let settled_tool = Ledger::nth(&self.ledger.tools, pick, |t| t.answered || t.cancelled);
        let unknown = RequestId(1_000_000 + pick as u64);
        let report = match what % 5 {
            0 => Report::ResponseHead { id: settled_request.unwrap_or(unknown), status: 200, headers: Vec::new() },
            1 => Report::Body { id: settled_request.unwrap_or(unknown), bytes: b"data: {}\n\n" },
            2 => Report::BodyEnd { id: settled_request.unwrap_or(unknown) },
            3 => Report::TransportFailed {
                id: settled_request.unwrap_or(unknown),
                error: TransportError { kind: TransportErrorKind::Reset, message: "late".into() },
            },
            _ => Report::ToolFinished {
                id: settled_tool.unwrap_or(ToolRunId(1_000_000 + pick as u64)),
                outcome: outcome(what),
            },
        };
        let deadline = self.subject.poll_timeout();
        let events = self.subject.event_count();
        let described = format!("{report:?}");
        self.subject.report(report, self.now);
        if let Some(effect) = self.subject.poll_effect() {
            return Err(format!("a stale {described} made an effect: {effect:?}"));
        }
        self.subject.drain_events()?;
        if self.subject.event_count() != events || self.subject.poll_timeout() != deadline {
            return Err(format!("a stale {described} changed the machine"));
        }
        Ok(())
    }

    /// Runs the steps, then cancels whatever is still in flight and checks that
    /// everything was settled.
    pub(crate) fn run(&mut self, steps: &[Step]) -> Result<(), String> {
        self.settle()?;
        for (i, step) in steps.iter().enumerate() {
            self.apply(step).map_err(|e| format!("after step {i} {step:?}: {e}"))?;
        }
        if !self.subject.at_rest() {
            self.apply(&Step::Cancel).map_err(|e| format!("after the final cancel: {e}"))?;
            if !self.subject.at_rest() {
                return Err("not at rest after the final cancel".into());
            }
        }
        self.ledger.all_settled()
    }
}
