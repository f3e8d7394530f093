//! The session manager's machine on a virtual clock: the sessions' news given as inputs,
//! every effect and feed event written to a transcript, compared whole. (Here, not in
//! omni-protocol, because the core never reads a clock, even in its tests.)
#![allow(clippy::unwrap_used)]

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use omni_protocol::agent::Status;
use omni_protocol::manager::*;
use omni_protocol::session::{Claim, SessionId, StoreError, StoreErrorKind};
use omni_protocol::Message;

struct Sim {
    manager: Manager,
    start: Instant,
    now: Duration,
    next_request: u64,
    log: String,
}

fn id(name: &str) -> SessionId {
    SessionId::new(name).unwrap()
}

fn started(controllers: usize) -> Started {
    Started {
        title: None,
        status: Status::Idle,
        controllers,
        claim: None,
        claimed_at: None,
        first_messages: Vec::new(),
    }
}

fn turn() -> Vec<Message> {
    vec![Message::user("How do I sort a Vec in Rust?"), Message::assistant("Use v.sort().")]
}

impl Sim {
    fn new(config: ManagerConfig) -> Self {
        Self {
            manager: Manager::new(config),
            start: Instant::now(),
            now: Duration::ZERO,
            next_request: 1,
            log: String::new(),
        }
    }

    fn at(&self) -> Instant {
        self.start + self.now
    }

    fn request(&mut self) -> RequestId {
        self.next_request += 1;
        RequestId(self.next_request - 1)
    }

    fn input(&mut self, input: ManagerInput) {
        let _ = writeln!(self.log, "{:>4}s < {}", self.now.as_secs(), describe_input(&input));
        self.manager.handle_input(input, self.at());
        self.drain();
    }

    fn open(&mut self, name: &str, create: bool, idle: IdleShutdown) -> RequestId {
        let request = self.request();
        self.input(ManagerInput::Open { request, id: id(name), create, idle });
        request
    }

    /// Jumps to the next deadline (if it comes within `limit`) and handles it.
    fn wait(&mut self, limit: Duration) {
        let Some((at, timer)) = self.manager.poll_timeout() else {
            self.now += limit;
            let _ = writeln!(self.log, "{:>4}s . nothing due", self.now.as_secs());
            return;
        };
        let due = at.saturating_duration_since(self.start);
        if due > self.now + limit {
            self.now += limit;
            let _ = writeln!(self.log, "{:>4}s . nothing due ({timer} at {}s)", self.now.as_secs(), due.as_secs());
            return;
        }
        self.now = self.now.max(due);
        let _ = writeln!(self.log, "{:>4}s ! {timer}", self.now.as_secs());
        self.manager.handle_timeout(self.at());
        self.drain();
    }

    fn drain(&mut self) {
        while let Some(effect) = self.manager.poll_effect() {
            let _ = writeln!(self.log, "{:>4}s > {}", self.now.as_secs(), describe_effect(&effect));
        }
        while let Some(event) = self.manager.poll_event() {
            let _ = writeln!(self.log, "{:>4}s feed {event:?}", self.now.as_secs());
        }
    }

    fn check(&self, expected: &str) {
        let expected: String =
            expected.lines().map(str::trim).filter(|l| !l.is_empty()).map(|l| l.to_owned() + "\n").collect();
        let got: String = self.log.lines().map(str::trim).map(|l| l.to_owned() + "\n").collect();
        assert_eq!(got, expected, "\n--- transcript ---\n{}", self.log);
    }
}

fn describe_input(input: &ManagerInput) -> String {
    match input {
        ManagerInput::Started { id, result: Ok(s) } => {
            format!("Started {id} status={:?} controllers={} title={:?}", s.status, s.controllers, s.title)
        }
        ManagerInput::Committed { id, first_messages } => format!("Committed {id} ({} messages)", first_messages.len()),
        other => format!("{other:?}"),
    }
}

fn describe_effect(effect: &ManagerEffect) -> String {
    match effect {
        ManagerEffect::MakeTitle { id, work, context, max_tokens } => format!(
            "MakeTitle {id} #{} max_tokens={max_tokens} {:?}",
            work.0,
            context.messages.first().map(Message::text).unwrap_or_default()
        ),
        ManagerEffect::Renew { renewal, claims } => format!(
            "Renew #{} [{}]",
            renewal.0,
            claims.iter().map(|c| format!("{}@{}", c.session(), c.token())).collect::<Vec<_>>().join(", ")
        ),
        other => format!("{other:?}"),
    }
}

#[test]
fn create_then_open_twice_started_then_existing() {
    let mut sim = Sim::new(ManagerConfig::default());
    let first = sim.open("s1", true, IdleShutdown::Default);
    let second = sim.open("s1", false, IdleShutdown::Never);
    let again = sim.open("s1", true, IdleShutdown::Default);
    sim.input(ManagerInput::Started { id: id("s1"), result: Ok(started(1)) });
    let later = sim.open("s1", false, IdleShutdown::Default);
    assert_eq!((first.0, second.0, again.0, later.0), (1, 2, 3, 4));
    sim.check(
        r#"
        0s < Open { request: RequestId(1), id: SessionId("s1"), create: true, idle: Default }
        0s > Start { request: RequestId(1), id: SessionId("s1"), create: true }
        0s < Open { request: RequestId(2), id: SessionId("s1"), create: false, idle: Never }
        0s < Open { request: RequestId(3), id: SessionId("s1"), create: true, idle: Default }
        0s > Answer { request: RequestId(3), answer: Err(Exists(SessionId("s1"))) }
        0s < Started s1 status=Idle controllers=1 title=None
        0s > Answer { request: RequestId(1), answer: Ok(Opened(Started)) }
        0s > Answer { request: RequestId(2), answer: Ok(Opened(Existing)) }
        0s feed Opened { id: SessionId("s1"), title: None, status: Idle }
        0s < Open { request: RequestId(4), id: SessionId("s1"), create: false, idle: Default }
        0s > Answer { request: RequestId(4), answer: Ok(Opened(Existing)) }
        "#,
    );
    assert_eq!(sim.manager.open_sessions().len(), 1);
}

#[test]
fn a_failed_load_fails_every_waiting_opener_and_keeps_nothing() {
    let mut sim = Sim::new(ManagerConfig::default());
    sim.open("gone", false, IdleShutdown::Default);
    sim.open("gone", false, IdleShutdown::Default);
    let error = StoreError::new(StoreErrorKind::NotFound, "gone", "no such session");
    sim.input(ManagerInput::Started { id: id("gone"), result: Err(ManagerError::Store(error)) });
    assert!(sim.manager.is_empty());
    assert_eq!(sim.log.matches("answer: Err(Store(").count(), 2, "{}", sim.log);
    assert!(!sim.log.contains("feed"), "nothing opened, nothing told: {}", sim.log);
}

#[test]
fn close_during_a_turn_waits_for_the_turn_to_finish() {
    let mut sim = Sim::new(ManagerConfig::default());
    sim.open("s1", true, IdleShutdown::Default);
    sim.input(ManagerInput::Started { id: id("s1"), result: Ok(started(1)) });
    sim.log.clear();
    sim.input(ManagerInput::Status { id: id("s1"), status: Status::Busy });
    let close = sim.request();
    sim.input(ManagerInput::Close { request: close, id: id("s1") });
    sim.input(ManagerInput::Committed { id: id("s1"), first_messages: turn() });
    sim.input(ManagerInput::Status { id: id("s1"), status: Status::Idle });
    sim.input(ManagerInput::Ended { id: id("s1"), reason: None });
    let again = sim.request();
    sim.input(ManagerInput::Close { request: again, id: id("s1") });
    sim.check(
        r#"
        0s < Status { id: SessionId("s1"), status: Busy }
        0s feed Status { id: SessionId("s1"), status: Busy }
        0s < Close { request: RequestId(2), id: SessionId("s1") }
        0s < Committed s1 (2 messages)
        0s > SetTitle { id: SessionId("s1"), title: Some("How do I sort a Vec in Rust?") }
        0s feed Title { id: SessionId("s1"), title: Some("How do I sort a Vec in Rust?") }
        0s < Status { id: SessionId("s1"), status: Idle }
        0s > Stop { id: SessionId("s1"), reason: Closed }
        0s feed Status { id: SessionId("s1"), status: Idle }
        0s < Ended { id: SessionId("s1"), reason: None }
        0s > Answer { request: RequestId(2), answer: Ok(Closed) }
        0s feed Closed { id: SessionId("s1"), reason: Closed }
        0s < Close { request: RequestId(3), id: SessionId("s1") }
        0s > Answer { request: RequestId(3), answer: Ok(Closed) }
        "#,
    );
}

#[test]
fn idle_shutdown_is_armed_without_controllers_and_disarmed_by_one_or_a_prompt() {
    let config = ManagerConfig { idle_after: Some(Duration::from_secs(300)), ..ManagerConfig::default() };
    let mut sim = Sim::new(config);
    sim.open("s1", true, IdleShutdown::Default);
    sim.input(ManagerInput::Started { id: id("s1"), result: Ok(started(1)) });
    sim.log.clear();
    // A controller holds it open: nothing is due.
    sim.wait(Duration::from_secs(600));
    // The last controller leaves: armed.
    sim.input(ManagerInput::Controllers { id: id("s1"), count: 0 });
    sim.now += Duration::from_secs(200);
    // A controller comes back (an observer becoming one is the same news): disarmed.
    sim.input(ManagerInput::Controllers { id: id("s1"), count: 1 });
    sim.wait(Duration::from_secs(600));
    sim.input(ManagerInput::Controllers { id: id("s1"), count: 0 });
    sim.now += Duration::from_secs(100);
    // A prompt (its agent busy) disarms it; the turn's end arms it again from then.
    sim.input(ManagerInput::Status { id: id("s1"), status: Status::Busy });
    sim.wait(Duration::from_secs(400));
    sim.input(ManagerInput::Status { id: id("s1"), status: Status::Idle });
    sim.wait(Duration::from_secs(600));
    sim.input(ManagerInput::Ended { id: id("s1"), reason: None });
    sim.check(
        r#"
        600s . nothing due
        600s < Controllers { id: SessionId("s1"), count: 0 }
        800s < Controllers { id: SessionId("s1"), count: 1 }
        1400s . nothing due
        1400s < Controllers { id: SessionId("s1"), count: 0 }
        1500s < Status { id: SessionId("s1"), status: Busy }
        1500s feed Status { id: SessionId("s1"), status: Busy }
        1900s . nothing due
        1900s < Status { id: SessionId("s1"), status: Idle }
        1900s feed Status { id: SessionId("s1"), status: Idle }
        2200s ! idle shutdown
        2200s > Stop { id: SessionId("s1"), reason: Idle }
        2200s < Ended { id: SessionId("s1"), reason: None }
        2200s feed Closed { id: SessionId("s1"), reason: Idle }
        "#,
    );
}

#[test]
fn a_session_opened_without_a_controller_closes_when_idle_and_never_with_never() {
    let mut sim = Sim::new(ManagerConfig { idle_after: Some(Duration::from_secs(60)), ..ManagerConfig::default() });
    sim.open("watched", true, IdleShutdown::Default);
    sim.open("kept", true, IdleShutdown::Never);
    sim.open("quick", true, IdleShutdown::After(Duration::from_secs(5)));
    for name in ["watched", "kept", "quick"] {
        // Started with observers only (the manager's own feed among them): no controller.
        sim.input(ManagerInput::Started { id: id(name), result: Ok(started(0)) });
    }
    sim.log.clear();
    sim.wait(Duration::from_secs(600));
    sim.wait(Duration::from_secs(600));
    sim.wait(Duration::from_secs(600));
    sim.check(
        r#"
        5s ! idle shutdown
        5s > Stop { id: SessionId("quick"), reason: Idle }
        60s ! idle shutdown
        60s > Stop { id: SessionId("watched"), reason: Idle }
        660s . nothing due
        "#,
    );
}

#[test]
fn a_model_title_and_its_failure_falling_back_to_the_heuristic() {
    let mut sim = Sim::new(ManagerConfig { titles: TitleMode::Model, ..ManagerConfig::default() });
    for name in ["good", "bad"] {
        sim.open(name, true, IdleShutdown::Never);
        sim.input(ManagerInput::Started { id: id(name), result: Ok(started(1)) });
    }
    sim.log.clear();
    sim.input(ManagerInput::Committed { id: id("good"), first_messages: turn() });
    sim.input(ManagerInput::Committed { id: id("bad"), first_messages: turn() });
    // A second commit starts no second title.
    sim.input(ManagerInput::Committed { id: id("good"), first_messages: turn() });
    sim.input(ManagerInput::TitleMade {
        id: id("good"),
        work: TitleId(0),
        result: Ok("\"Sorting Vectors in Rust.\"".into()),
    });
    sim.input(ManagerInput::TitleMade { id: id("bad"), work: TitleId(1), result: Err("HTTP 500".into()) });
    sim.check(
        r#"
        0s < Committed good (2 messages)
        0s > MakeTitle good #0 max_tokens=50 "User: How do I sort a Vec in Rust?\nAssistant: Use v.sort()."
        0s < Committed bad (2 messages)
        0s > MakeTitle bad #1 max_tokens=50 "User: How do I sort a Vec in Rust?\nAssistant: Use v.sort()."
        0s < Committed good (2 messages)
        0s < TitleMade { id: SessionId("good"), work: TitleId(0), result: Ok("\"Sorting Vectors in Rust.\"") }
        0s > SetTitle { id: SessionId("good"), title: Some("Sorting Vectors in Rust") }
        0s feed Title { id: SessionId("good"), title: Some("Sorting Vectors in Rust") }
        0s < TitleMade { id: SessionId("bad"), work: TitleId(1), result: Err("HTTP 500") }
        0s > SetTitle { id: SessionId("bad"), title: Some("How do I sort a Vec in Rust?") }
        0s feed TitleFailed { id: SessionId("bad"), error: "HTTP 500" }
        0s feed Title { id: SessionId("bad"), title: Some("How do I sort a Vec in Rust?") }
        "#,
    );
}

#[test]
fn a_rename_wins_over_a_title_still_being_made() {
    let mut sim = Sim::new(ManagerConfig { titles: TitleMode::Model, ..ManagerConfig::default() });
    sim.open("s1", true, IdleShutdown::Never);
    sim.input(ManagerInput::Started { id: id("s1"), result: Ok(started(1)) });
    sim.input(ManagerInput::Committed { id: id("s1"), first_messages: turn() });
    sim.log.clear();
    let rename = sim.request();
    sim.input(ManagerInput::Rename { request: rename, id: id("s1"), title: Some("Mine".into()) });
    sim.input(ManagerInput::TitleMade { id: id("s1"), work: TitleId(0), result: Ok("Model title".into()) });
    sim.check(
        r#"
        0s < Rename { request: RequestId(2), id: SessionId("s1"), title: Some("Mine") }
        0s > SetTitle { id: SessionId("s1"), title: Some("Mine") }
        0s > Answer { request: RequestId(2), answer: Ok(Renamed) }
        0s feed Title { id: SessionId("s1"), title: Some("Mine") }
        0s < TitleMade { id: SessionId("s1"), work: TitleId(0), result: Ok("Model title") }
        "#,
    );
}

#[test]
fn a_loaded_session_with_a_turn_and_no_title_gets_one_at_once() {
    let mut sim = Sim::new(ManagerConfig::default());
    sim.open("old", false, IdleShutdown::Never);
    let loaded = Started { first_messages: turn(), ..started(1) };
    sim.input(ManagerInput::Started { id: id("old"), result: Ok(loaded) });
    let titled = Started { first_messages: turn(), title: Some("Kept".into()), ..started(1) };
    sim.open("titled", false, IdleShutdown::Never);
    sim.input(ManagerInput::Started { id: id("titled"), result: Ok(titled) });
    assert!(sim.log.contains(r#"SetTitle { id: SessionId("old"), title: Some("How do I sort a Vec in Rust?") }"#));
    assert!(!sim.log.contains(r#"SetTitle { id: SessionId("titled")"#), "{}", sim.log);
}

#[test]
fn rename_and_delete_of_a_session_that_does_not_run_go_to_the_store() {
    let mut sim = Sim::new(ManagerConfig::default());
    let rename = sim.request();
    sim.input(ManagerInput::Rename { request: rename, id: id("kept"), title: Some("New".into()) });
    sim.input(ManagerInput::StoreDone { request: rename, result: Ok(true) });
    sim.open("s1", true, IdleShutdown::Never);
    sim.input(ManagerInput::Started { id: id("s1"), result: Ok(started(1)) });
    let (first, second) = (sim.request(), sim.request());
    sim.input(ManagerInput::Delete { request: first, id: id("s1") });
    sim.input(ManagerInput::Delete { request: second, id: id("s1") });
    sim.input(ManagerInput::Ended { id: id("s1"), reason: None });
    sim.input(ManagerInput::StoreDone { request: first, result: Ok(true) });
    sim.check(
        r#"
        0s < Rename { request: RequestId(1), id: SessionId("kept"), title: Some("New") }
        0s > Rename { request: RequestId(1), id: SessionId("kept"), title: Some("New") }
        0s < StoreDone { request: RequestId(1), result: Ok(true) }
        0s > Answer { request: RequestId(1), answer: Ok(Renamed) }
        0s < Open { request: RequestId(2), id: SessionId("s1"), create: true, idle: Never }
        0s > Start { request: RequestId(2), id: SessionId("s1"), create: true }
        0s < Started s1 status=Idle controllers=1 title=None
        0s > Answer { request: RequestId(2), answer: Ok(Opened(Started)) }
        0s feed Opened { id: SessionId("s1"), title: None, status: Idle }
        0s < Delete { request: RequestId(3), id: SessionId("s1") }
        0s > Stop { id: SessionId("s1"), reason: Deleted }
        0s < Delete { request: RequestId(4), id: SessionId("s1") }
        0s < Ended { id: SessionId("s1"), reason: None }
        0s > Delete { request: RequestId(3), id: SessionId("s1") }
        0s feed Closed { id: SessionId("s1"), reason: Deleted }
        0s < StoreDone { request: RequestId(3), result: Ok(true) }
        0s > Answer { request: RequestId(3), answer: Ok(Deleted(true)) }
        0s > Answer { request: RequestId(4), answer: Ok(Deleted(true)) }
        "#,
    );
}

#[test]
fn an_open_while_it_stops_starts_it_again_after() {
    let mut sim = Sim::new(ManagerConfig::default());
    sim.open("s1", true, IdleShutdown::Never);
    sim.input(ManagerInput::Started { id: id("s1"), result: Ok(started(1)) });
    let close = sim.request();
    sim.input(ManagerInput::Close { request: close, id: id("s1") });
    sim.log.clear();
    sim.open("s1", false, IdleShutdown::Never);
    sim.input(ManagerInput::Ended { id: id("s1"), reason: None });
    sim.check(
        r#"
        0s < Open { request: RequestId(3), id: SessionId("s1"), create: false, idle: Never }
        0s < Ended { id: SessionId("s1"), reason: None }
        0s > Answer { request: RequestId(2), answer: Ok(Closed) }
        0s > Start { request: RequestId(3), id: SessionId("s1"), create: false }
        0s feed Closed { id: SessionId("s1"), reason: Closed }
        "#,
    );
}

#[test]
fn the_limit_of_sessions_is_a_typed_refusal() {
    let mut sim = Sim::new(ManagerConfig { max_sessions: 1, ..ManagerConfig::default() });
    sim.open("a", true, IdleShutdown::Never);
    sim.open("b", true, IdleShutdown::Never);
    assert!(sim.log.contains("Err(TooMany { limit: 1 })"), "{}", sim.log);
}

fn leased(name: &str, token: u64) -> Started {
    let claim = Claim::new(id(name), token, Some(Duration::from_secs(30)));
    Started { claim: Some(claim), ..started(1) }
}

#[test]
fn leases_are_renewed_together_and_a_refused_one_stops_its_session() {
    let mut sim = Sim::new(ManagerConfig { idle_after: None, ..ManagerConfig::default() });
    for (name, token) in [("a", 1), ("b", 7)] {
        sim.open(name, false, IdleShutdown::Default);
        sim.input(ManagerInput::Started { id: id(name), result: Ok(leased(name, token)) });
    }
    sim.log.clear();
    sim.wait(Duration::from_secs(60));
    sim.input(ManagerInput::Renewed { renewal: RenewalId(0), results: vec![Ok(()), Ok(())] });
    sim.wait(Duration::from_secs(60));
    let taken = StoreError::new(StoreErrorKind::NotOwner, "b", "another node took the session over");
    sim.input(ManagerInput::Renewed { renewal: RenewalId(1), results: vec![Ok(()), Err(taken)] });
    sim.input(ManagerInput::Ended { id: id("b"), reason: None });
    sim.wait(Duration::from_secs(60));
    sim.check(
        r#"
        10s ! lease renewal
        10s > Renew #0 [a@1, b@7]
        10s < Renewed { renewal: RenewalId(0), results: [Ok(()), Ok(())] }
        20s ! lease renewal
        20s > Renew #1 [a@1, b@7]
        20s < Renewed { renewal: RenewalId(1), results: [Ok(()), Err(StoreError { kind: NotOwner, location: "b", message: "another node took the session over", owner: None })] }
        20s > Stop { id: SessionId("b"), reason: LeaseLost("b: another node took the session over") }
        20s < Ended { id: SessionId("b"), reason: None }
        20s feed Closed { id: SessionId("b"), reason: LeaseLost("b: another node took the session over") }
        30s ! lease renewal
        30s > Renew #2 [a@1]
        "#,
    );
}

#[test]
fn a_lease_not_renewed_in_time_stops_its_session_even_mid_turn() {
    let mut sim = Sim::new(ManagerConfig { idle_after: None, ..ManagerConfig::default() });
    sim.open("a", false, IdleShutdown::Default);
    sim.input(ManagerInput::Started { id: id("a"), result: Ok(leased("a", 3)) });
    sim.input(ManagerInput::Status { id: id("a"), status: Status::Busy });
    sim.log.clear();
    // The renewal goes out and its store never answers (a partition).
    sim.wait(Duration::from_secs(60));
    sim.wait(Duration::from_secs(60));
    let unreachable = StoreError::new(StoreErrorKind::Io, "db", "connection refused");
    sim.input(ManagerInput::Renewed { renewal: RenewalId(0), results: vec![Err(unreachable)] });
    sim.check(
        r#"
        10s ! lease renewal
        10s > Renew #0 [a@3]
        30s ! lease lapse
        30s > Stop { id: SessionId("a"), reason: LeaseLost("the lease was not renewed in time") }
        30s < Renewed { renewal: RenewalId(0), results: [Err(StoreError { kind: Io, location: "db", message: "connection refused", owner: None })] }
        "#,
    );
}

#[test]
fn a_failed_renewal_that_may_pass_is_tried_again_soon() {
    let mut sim = Sim::new(ManagerConfig { idle_after: None, ..ManagerConfig::default() });
    sim.open("a", false, IdleShutdown::Default);
    sim.input(ManagerInput::Started { id: id("a"), result: Ok(leased("a", 3)) });
    sim.log.clear();
    sim.wait(Duration::from_secs(60));
    let blip = StoreError::new(StoreErrorKind::Io, "db", "connection reset");
    sim.input(ManagerInput::Renewed { renewal: RenewalId(0), results: vec![Err(blip)] });
    sim.wait(Duration::from_secs(60));
    sim.input(ManagerInput::Renewed { renewal: RenewalId(1), results: vec![Ok(())] });
    sim.wait(Duration::from_secs(60));
    sim.check(
        r#"
        10s ! lease renewal
        10s > Renew #0 [a@3]
        10s < Renewed { renewal: RenewalId(0), results: [Err(StoreError { kind: Io, location: "db", message: "connection reset", owner: None })] }
        13s ! lease renewal
        13s > Renew #1 [a@3]
        13s < Renewed { renewal: RenewalId(1), results: [Ok(())] }
        23s ! lease renewal
        23s > Renew #2 [a@3]
        "#,
    );
}

#[test]
fn shutting_down_closes_every_session_and_refuses_new_ones() {
    let mut sim = Sim::new(ManagerConfig::default());
    sim.open("a", true, IdleShutdown::Never);
    sim.input(ManagerInput::Started { id: id("a"), result: Ok(started(1)) });
    sim.open("b", true, IdleShutdown::Never);
    sim.log.clear();
    sim.manager.shut_down(sim.at());
    sim.drain();
    sim.open("c", true, IdleShutdown::Never);
    sim.input(ManagerInput::Started { id: id("b"), result: Ok(started(1)) });
    sim.check(
        r#"
        0s > Stop { id: SessionId("a"), reason: Closed }
        0s < Open { request: RequestId(3), id: SessionId("c"), create: true, idle: Never }
        0s > Answer { request: RequestId(3), answer: Err(ShuttingDown) }
        0s < Started b status=Idle controllers=1 title=None
        0s > Answer { request: RequestId(2), answer: Ok(Opened(Started)) }
        0s > Stop { id: SessionId("b"), reason: Closed }
        0s feed Opened { id: SessionId("b"), title: None, status: Idle }
        "#,
    );
}

#[test]
fn a_lease_runs_from_when_its_claim_was_asked_for() {
    let mut sim = Sim::new(ManagerConfig { idle_after: None, ..ManagerConfig::default() });
    sim.open("a", false, IdleShutdown::Default);
    // The start waited 25 s for another owner, then claimed: the lease of 30 s runs from
    // the claim, not from the start.
    sim.now += Duration::from_secs(25);
    let claimed_at = Some(sim.at());
    sim.now += Duration::from_secs(1);
    sim.input(ManagerInput::Started { id: id("a"), result: Ok(Started { claimed_at, ..leased("a", 9) }) });
    sim.log.clear();
    // Nothing is renewed or lost before 10 s after the start's news; had the lease been
    // counted from the `Start` (0 s), it would have lapsed at 30 s.
    sim.wait(Duration::from_secs(60));
    sim.input(ManagerInput::Renewed { renewal: RenewalId(0), results: vec![Ok(())] });
    sim.wait(Duration::from_secs(60));
    sim.check(
        r#"
        36s ! lease renewal
        36s > Renew #0 [a@9]
        36s < Renewed { renewal: RenewalId(0), results: [Ok(())] }
        46s ! lease renewal
        46s > Renew #1 [a@9]
        "#,
    );
}
