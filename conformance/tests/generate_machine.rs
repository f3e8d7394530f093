//! The generate machine on its own, on a virtual clock (no driver): the response size
//! limit and redirects. Integration tests of the core, kept out of `core/src` so that the
//! core's sources never read a clock, even in tests: each test reads it once here for
//! the virtual clock's starting point, and the machine is only ever given instants.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

/// The response size limit: counted over the body bytes of one attempt, what fits is
/// kept, and going past it fails the call at once (no retry). An error page is read
/// only up to the part kept.
mod size_limit {
    use std::time::Instant;

    use omni_protocol::generate::{
        Effect, Generate, GenerateConfig, GenerateError, GenerateEvent, Input, Report, RetryPolicy,
        DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_STALL_TIMEOUT,
    };
    use omni_protocol::{Context, Dialect, Model, Options, Provider};

    /// How much of an error page the machine keeps (`MAX_ERROR_BODY` in the core).
    const ERROR_BODY_KEPT: usize = 64 * 1024;

    /// A call to an OpenAI-compatible server whose responses may be `limit` bytes long, with
    /// retries left (which the size limit must not use).
    fn call(limit: u64, now: Instant) -> Generate {
        call_with(limit, RetryPolicy::default(), now)
    }

    fn call_with(limit: u64, retry: RetryPolicy, now: Instant) -> Generate {
        let model = Model::new("local", "m", Dialect::OpenaiCompletions);
        let provider = Provider::openai_compatible("local", "http://127.0.0.1:9/v1", None);
        let mut config = GenerateConfig::new(model, provider, Context::from_prompt("hi"), Options::default());
        config.max_response_bytes = limit;
        config.retry = retry;
        Generate::new(config, now).expect("machine")
    }

    fn chunk(text: &str) -> String {
        format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{text}\"}}}}]}}\n\n")
    }

    const END: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

    /// Feeds `body` in pieces of `piece` bytes after a 200 head; returns the effects and
    /// events that followed.
    fn feed(machine: &mut Generate, body: &[u8], piece: usize, now: Instant) -> (Vec<Effect>, Vec<GenerateEvent>) {
        let Some(Effect::SendRequest { id, .. }) = machine.poll_effect() else { panic!("a request") };
        // As a driver does: every effect is taken before the next input.
        let mut effects = Vec::new();
        let mut input = |machine: &mut Generate, report: Report<'_>| {
            machine.handle_input(Input::Report(report), now).expect("a report is never refused");
            effects.extend(std::iter::from_fn(|| machine.poll_effect()));
        };
        input(machine, Report::ResponseHead { id, status: 200, headers: Vec::new() });
        for bytes in body.chunks(piece) {
            input(machine, Report::Body { id, bytes });
        }
        input(machine, Report::BodyEnd { id });
        (effects, std::iter::from_fn(|| machine.poll_event()).collect())
    }

    #[test]
    fn a_response_past_the_limit_fails_typed_keeping_what_fitted() {
        let now = Instant::now();
        let kept = chunk("Hello") + &chunk(" world");
        let body = kept.clone() + &chunk(" and more") + END;
        for piece in [1, 7, body.len()] {
            let mut machine = call(kept.len() as u64 + 5, now);
            let (effects, events) = feed(&mut machine, body.as_bytes(), piece, now);
            assert!(matches!(effects[..], [Effect::CancelRequest { .. }]), "the request is closed: {effects:?}");
            let Some(GenerateEvent::Failed { error, partial }) = events.last() else { panic!("failed: {events:?}") };
            assert_eq!(**error, GenerateError::ResponseTooLarge(kept.len() as u64 + 5), "in pieces of {piece}");
            assert_eq!(partial.text(), "Hello world", "what arrived within the limit is kept");
            assert!(!events.iter().any(|e| matches!(e, GenerateEvent::Retry { .. })), "not retried");
            assert!(machine.is_done());
        }
    }

    #[test]
    fn a_response_of_exactly_the_limit_finishes() {
        let now = Instant::now();
        let body = chunk("Hello") + END;
        let mut machine = call(body.len() as u64, now);
        let (_, events) = feed(&mut machine, body.as_bytes(), 3, now);
        let Some(GenerateEvent::Finished(response)) = events.last() else { panic!("finished: {events:?}") };
        assert_eq!(response.text(), "Hello");
    }

    #[test]
    fn an_error_body_counts_too() {
        let now = Instant::now();
        let mut machine = call(1024, now);
        let Some(Effect::SendRequest { id, .. }) = machine.poll_effect() else { panic!("a request") };
        machine
            .handle_input(Input::Report(Report::ResponseHead { id, status: 500, headers: Vec::new() }), now)
            .expect("a report is never refused");
        let page = vec![b'x'; 600];
        machine.handle_input(Input::Report(Report::Body { id, bytes: &page }), now).expect("a report is never refused");
        assert!(machine.poll_event().is_none(), "600 bytes fit");
        machine.handle_input(Input::Report(Report::Body { id, bytes: &page }), now).expect("a report is never refused");
        let events: Vec<_> = std::iter::from_fn(|| machine.poll_event()).collect();
        assert!(
            matches!(&events[..], [GenerateEvent::Failed { error, .. }] if matches!(**error, GenerateError::ResponseTooLarge(1024)))
        );
    }

    #[test]
    fn a_huge_error_page_ends_the_attempt_once_its_kept_part_is_full() {
        let start = Instant::now();
        let mut machine = call_with(DEFAULT_MAX_RESPONSE_BYTES, RetryPolicy::none(), start);
        let Some(Effect::SendRequest { id, .. }) = machine.poll_effect() else { panic!("a request") };
        machine
            .handle_input(Input::Report(Report::ResponseHead { id, status: 500, headers: Vec::new() }), start)
            .expect("a report is never refused");
        let page = vec![b'x'; 4096];
        let stall = DEFAULT_STALL_TIMEOUT;
        let mut now = start;
        for _ in 0..(ERROR_BODY_KEPT / page.len() - 1) {
            // A slow page: each piece comes just within the stall limit, which it resets.
            now += stall - std::time::Duration::from_millis(1);
            machine
                .handle_input(Input::Report(Report::Body { id, bytes: &page }), now)
                .expect("a report is never refused");
            assert!(machine.poll_event().is_none(), "still reading the page");
            assert!(machine.poll_timeout().is_some_and(|(t, _)| t > now), "bytes of the page are progress");
        }
        machine.handle_input(Input::Report(Report::Body { id, bytes: &page }), now).expect("a report is never refused");
        let effects: Vec<_> = std::iter::from_fn(|| machine.poll_effect()).collect();
        assert!(matches!(effects[..], [Effect::CancelRequest { .. }]), "the rest of the page is not read: {effects:?}");
        let events: Vec<_> = std::iter::from_fn(|| machine.poll_event()).collect();
        let [GenerateEvent::Failed { error, .. }] = &events[..] else { panic!("the provider's error: {events:?}") };
        let GenerateError::Provider(error) = &**error else { panic!("the provider's error: {events:?}") };
        assert_eq!(error.status, Some(500));
        assert_eq!(error.body.as_ref().map(String::len), Some(ERROR_BODY_KEPT), "the kept part");
    }

    #[test]
    fn the_default_limit_is_the_documented_one() {
        let model = Model::new("local", "m", Dialect::OpenaiCompletions);
        let provider = Provider::openai_compatible("local", "http://127.0.0.1:9/v1", None);
        let config = GenerateConfig::new(model, provider, Context::from_prompt("hi"), Options::default());
        assert_eq!(config.max_response_bytes, 256 * 1024 * 1024);
    }
}

/// The generate machine's side of redirects: a same-origin redirect drops the 3xx's
/// request and sends the same one again under a new id; another origin fails the call
/// at once, unretried, with the key cut out of the error.
mod redirects {
    use std::time::Instant;

    use omni_protocol::generate::{
        Effect, Generate, GenerateConfig, GenerateError, GenerateEvent, Input, Report, RequestId,
    };
    use omni_protocol::transport::RedirectError;
    use omni_protocol::{Auth, Provider};
    use omni_protocol::{Context, Dialect, Model, Options};

    fn machine(now: Instant) -> Generate {
        let provider = Provider {
            dialect: Dialect::AnthropicMessages,
            auth: Auth::Header { name: "x-api-key".into() },
            ..Provider::openai_compatible("anthropic", "http://127.0.0.1:9/v1", Some("K"))
        };
        let model = Model::new("anthropic", "claude-sonnet-4-5", Dialect::AnthropicMessages);
        let mut config = GenerateConfig::new(model, provider, Context::from_prompt("hi"), Options::default());
        config.api_key = Some("sk-machine-0123456789".into());
        Generate::new(config, now).expect("machine")
    }

    fn head(id: RequestId, status: u16, location: &str) -> Input<'static> {
        Input::Report(Report::ResponseHead { id, status, headers: vec![("location".into(), location.into())] })
    }

    fn effects(m: &mut Generate) -> Vec<Effect> {
        std::iter::from_fn(|| m.poll_effect()).collect()
    }

    #[test]
    fn a_same_origin_redirect_is_sent_again_under_a_new_id() {
        let now = Instant::now();
        let mut m = machine(now);
        let [Effect::SendRequest { id: first, request }] = &effects(&mut m)[..] else { panic!() };
        m.handle_input(head(*first, 308, "/v2/messages"), now).expect("a report is never refused");
        let sent = effects(&mut m);
        let [Effect::CancelRequest { id: cancelled }, Effect::SendRequest { id: second, request: again }] = &sent[..]
        else {
            panic!("{sent:?}")
        };
        assert_eq!(cancelled, first);
        assert_ne!(second, first);
        assert_eq!(again.url, "http://127.0.0.1:9/v2/messages");
        assert_eq!((&again.headers, &again.body), (&request.headers, &request.body));
        // The old id's late reports are ignored; the new one streams as usual.
        m.handle_input(Input::Report(Report::BodyEnd { id: *first }), now).expect("a report is never refused");
        assert!(!m.is_done());
    }

    #[test]
    fn another_origin_fails_the_call_unretried_and_scrubbed() {
        let now = Instant::now();
        let mut m = machine(now);
        let [Effect::SendRequest { id, .. }] = &effects(&mut m)[..] else { panic!() };
        m.handle_input(head(*id, 302, "http://evil.example/?echo=sk-machine-0123456789"), now)
            .expect("a report is never refused");
        assert_eq!(effects(&mut m), [Effect::CancelRequest { id: *id }]);
        let events: Vec<_> = std::iter::from_fn(|| m.poll_event()).collect();
        let [GenerateEvent::Failed { error, .. }] = &events[..] else { panic!("{events:?}") };
        let GenerateError::Redirect(RedirectError::OtherOrigin { status, location }) = &**error else {
            panic!("{events:?}")
        };
        assert_eq!((*status, location.as_str()), (302, "http://evil.example/?echo=<redacted>"));
    }
}
