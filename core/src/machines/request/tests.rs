//! The request sub-machine's own decisions, on a clock of its own (a `Duration` since
//! the start: the core reads none, even in tests).

use std::collections::VecDeque;
use std::time::Duration;

use super::*;
use crate::wire::http::Method;

const STALL: Duration = Duration::from_secs(120);
const ANSWER: &str =
    "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
const HALF: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n";

/// The owner: its id counter and effect queue.
struct Owner {
    next_id: u64,
    effects: VecDeque<Effect>,
}

/// Where the stream's events go (these tests look only at what ends an exchange).
struct Streamed;

impl StreamSink for Streamed {
    fn stream(&mut self, _: StreamEvent) {}
}

impl Owner {
    fn out(&mut self) -> Out<'_> {
        Out { next_id: &mut self.next_id, effects: &mut self.effects }
    }
    fn take(&mut self) -> Vec<Effect> {
        self.effects.drain(..).collect()
    }
}

fn limits(timeout: Option<Duration>) -> Limits {
    Limits { retry: RetryPolicy::default(), stall_timeout: STALL, timeout, max_response_bytes: 1 << 20 }
}

fn start(owner: &mut Owner, timeout: Option<Duration>) -> (Request<Duration>, RequestId) {
    let http = HttpRequest {
        method: Method::Post,
        url: "http://127.0.0.1:9/v1/chat".into(),
        headers: Vec::new(),
        body: b"{}".to_vec(),
    };
    let model = Model::new("local", "m", Dialect::OpenaiCompletions);
    let request = Request::start(http, model, limits(timeout), Duration::ZERO, &mut owner.out());
    let [Effect::SendRequest { id, .. }] = owner.take()[..] else { panic!("one request") };
    (request, id)
}

/// A request event, unboxed for patterns.
#[derive(Debug)]
enum Said {
    Retry { attempt: u32, delay: Duration, error: GenerateError },
    Finished(Response),
    Failed { error: GenerateError, partial: Option<Response> },
}

fn events(request: &mut Request<Duration>) -> Vec<Said> {
    std::iter::from_fn(|| request.poll_event())
        .map(|event| match event {
            RequestEvent::Retry { attempt, delay, error } => Said::Retry { attempt, delay, error: *error },
            RequestEvent::Finished(response) => Said::Finished(*response),
            RequestEvent::Failed(failure) => Said::Failed { error: failure.0, partial: failure.1 },
        })
        .collect()
}

fn head(id: RequestId, status: u16) -> Report<'static> {
    Report::ResponseHead { id, status, headers: Vec::new() }
}

#[test]
fn ids_come_from_the_owners_counter() {
    let mut owner = Owner { next_id: 41, effects: VecDeque::new() };
    let (_, id) = start(&mut owner, None);
    assert_eq!((id, owner.next_id), (RequestId(41), 42));
}

#[test]
fn a_server_error_is_retried_after_its_backoff_under_a_new_id() {
    let mut owner = Owner { next_id: 0, effects: VecDeque::new() };
    let (mut request, first) = start(&mut owner, None);
    let now = Duration::ZERO;
    request.handle_report(head(first, 500), now, &mut owner.out(), &mut Streamed);
    request.handle_report(Report::BodyEnd { id: first }, now, &mut owner.out(), &mut Streamed);
    let [Said::Retry { attempt: 1, delay, error: GenerateError::Provider(_) }] = events(&mut request)[..] else {
        panic!("a retry")
    };
    assert_eq!(request.timers().next(), Some((delay, Timer::RetryBackoff)));
    request.handle_timeout(delay - Duration::from_millis(1), &mut owner.out());
    assert!(owner.take().is_empty(), "not before its time");
    request.handle_timeout(delay, &mut owner.out());
    let [Effect::SendRequest { id: second, .. }] = owner.take()[..] else { panic!("sent again") };
    assert_ne!(second, first);
    // The first request's late reports are ignored; the second one answers.
    request.handle_report(Report::BodyEnd { id: first }, delay, &mut owner.out(), &mut Streamed);
    assert!(events(&mut request).is_empty());
    request.handle_report(head(second, 200), delay, &mut owner.out(), &mut Streamed);
    request.handle_report(
        Report::Body { id: second, bytes: ANSWER.as_bytes() },
        delay,
        &mut owner.out(),
        &mut Streamed,
    );
    request.handle_report(Report::BodyEnd { id: second }, delay, &mut owner.out(), &mut Streamed);
    let said = events(&mut request);
    assert!(matches!(said.last(), Some(Said::Finished(r)) if r.text() == "Hi"), "{said:?}");
    assert_eq!(request.timers().next(), None);
}

#[test]
fn a_stall_is_retried_once_then_fails() {
    let mut owner = Owner { next_id: 0, effects: VecDeque::new() };
    let (mut request, first) = start(&mut owner, None);
    assert_eq!(request.timers().next(), Some((STALL, Timer::Stall)));
    request.handle_timeout(STALL, &mut owner.out());
    assert_eq!(owner.take(), [Effect::CancelRequest { id: first }]);
    let [Said::Retry { delay, error: GenerateError::Stalled(STALL), .. }] = events(&mut request)[..] else {
        panic!("a retry")
    };
    request.handle_timeout(STALL + delay, &mut owner.out());
    let [Effect::SendRequest { id: second, .. }] = owner.take()[..] else { panic!("sent again") };
    request.handle_timeout(STALL + delay + STALL, &mut owner.out());
    assert_eq!(owner.take(), [Effect::CancelRequest { id: second }]);
    let said = events(&mut request);
    assert!(
        matches!(said[..], [Said::Failed { error: GenerateError::Stalled(_), partial: None }]),
        "one stall retry, not two: {said:?}"
    );
}

#[test]
fn the_total_timeout_comes_first_when_it_is_shorter() {
    let mut owner = Owner { next_id: 0, effects: VecDeque::new() };
    let limit = Duration::from_secs(30);
    let (mut request, _) = start(&mut owner, Some(limit));
    assert_eq!(request.timers().next(), Some((limit, Timer::RequestTimeout)));
    request.handle_timeout(limit, &mut owner.out());
    let said = events(&mut request);
    assert!(matches!(said[..], [Said::Retry { error: GenerateError::Timeout(l), .. }] if l == limit), "{said:?}");
}

#[test]
fn a_break_after_content_reached_the_owner_is_not_retried_and_keeps_it() {
    let mut owner = Owner { next_id: 0, effects: VecDeque::new() };
    let (mut request, id) = start(&mut owner, None);
    let now = Duration::from_secs(1);
    request.handle_report(head(id, 200), now, &mut owner.out(), &mut Streamed);
    request.handle_report(Report::Body { id, bytes: HALF.as_bytes() }, now, &mut owner.out(), &mut Streamed);
    assert_eq!(request.timers().next(), Some((now + STALL, Timer::Stall)), "content is progress");
    let broken = TransportError { kind: TransportErrorKind::Other, message: "gone".into() };
    request.handle_report(Report::TransportFailed { id, error: broken }, now, &mut owner.out(), &mut Streamed);
    let said = events(&mut request);
    let Some(Said::Failed { error: GenerateError::Transport(error), partial: Some(partial) }) = said.last() else {
        panic!("{said:?}")
    };
    assert_eq!(error.kind, TransportErrorKind::Reset, "after the head: a reset");
    assert_eq!(partial.text(), "Hi");
    assert!(owner.take().is_empty(), "a failed transport has nothing left to cancel");
}

#[test]
fn a_break_before_the_head_is_a_connect_failure_and_retried() {
    let mut owner = Owner { next_id: 0, effects: VecDeque::new() };
    let (mut request, id) = start(&mut owner, None);
    let refused = TransportError { kind: TransportErrorKind::Reset, message: "refused".into() };
    request.handle_report(
        Report::TransportFailed { id, error: refused },
        Duration::ZERO,
        &mut owner.out(),
        &mut Streamed,
    );
    let said = events(&mut request);
    let [Said::Retry { error: GenerateError::Transport(error), .. }] = &said[..] else { panic!("{said:?}") };
    assert_eq!(error.kind, TransportErrorKind::Connect);
}

#[test]
fn cancel_closes_the_request_in_flight_and_returns_what_came() {
    let mut owner = Owner { next_id: 0, effects: VecDeque::new() };
    let (mut request, id) = start(&mut owner, None);
    request.handle_report(head(id, 200), Duration::ZERO, &mut owner.out(), &mut Streamed);
    request.handle_report(Report::Body { id, bytes: HALF.as_bytes() }, Duration::ZERO, &mut owner.out(), &mut Streamed);
    let partial = request.cancel(&mut owner.out()).expect("what came");
    assert_eq!(partial.text(), "Hi");
    assert_eq!(owner.take(), [Effect::CancelRequest { id }]);
    assert_eq!(request.timers().next(), None);
    assert!(request.cancel(&mut owner.out()).is_none(), "a second cancel has nothing to do");
    assert!(owner.take().is_empty());
}
