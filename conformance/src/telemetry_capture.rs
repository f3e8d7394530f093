//! A `tracing` subscriber that keeps every span omni makes, with its declared fields,
//! recorded values, parent, events and whether it was closed: what the telemetry suite
//! checks (`telemetry_suite`). Installed once per process as the global dispatcher (the
//! drivers' work runs on other threads than the test's); each check looks only at the
//! spans under a root span of its own, so tests in one process do not see each other's.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::{Mutex, OnceLock, PoisonError};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// One span as the subscriber saw it.
#[derive(Debug, Clone)]
pub struct SpanRecord {
    /// Its id (the subscriber's own numbering).
    pub id: u64,
    /// The `tracing` name (the operation: `chat`, `invoke_agent`, `execute_tool`).
    pub name: &'static str,
    /// The `tracing` target.
    pub target: &'static str,
    /// Its parent, if any.
    pub parent: Option<u64>,
    /// Every field declared when it was made.
    pub declared: Vec<&'static str>,
    /// Every field with a value, as text (strings unquoted).
    pub fields: BTreeMap<String, String>,
    /// Fields recorded that were never declared (`tracing` drops these).
    pub undeclared: Vec<String>,
    /// Its events, in order.
    pub events: Vec<EventRecord>,
    /// Whether it was closed (its last handle dropped).
    pub closed: bool,
    refs: usize,
    metadata: &'static Metadata<'static>,
}

/// One event.
#[derive(Debug, Clone)]
pub struct EventRecord {
    /// Its level.
    pub level: Level,
    /// Its fields (`message` included).
    pub fields: BTreeMap<String, String>,
}

#[derive(Debug, Default)]
struct State {
    next: u64,
    spans: BTreeMap<u64, SpanRecord>,
    /// Events with no span.
    orphans: Vec<EventRecord>,
}

/// The capturing subscriber.
#[derive(Debug, Default)]
pub struct Capture {
    state: Mutex<State>,
}

thread_local! {
    /// The spans entered on this thread, innermost last.
    static ENTERED: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

struct Values<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Values<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_string(), format!("{value:?}"));
    }
}

impl Capture {
    /// The process's capture, installed as the global dispatcher on first use.
    pub fn global() -> &'static Self {
        static CAPTURE: OnceLock<&'static Capture> = OnceLock::new();
        CAPTURE.get_or_init(|| {
            let capture: &'static Self = Box::leak(Box::default());
            tracing::subscriber::set_global_default(Global(capture)).expect("no other global subscriber");
            capture
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every span under `root` (its descendants), in the order they were made.
    pub fn under(&self, root: &tracing::Span) -> Vec<SpanRecord> {
        let root = root.id().expect("the root span is enabled").into_u64();
        let state = self.lock();
        let descends = |mut id: u64| loop {
            match state.spans.get(&id).and_then(|s| s.parent) {
                Some(parent) if parent == root => return true,
                Some(parent) => id = parent,
                None => return false,
            }
        };
        state.spans.values().filter(|s| descends(s.id)).cloned().collect()
    }

    /// Every value recorded anywhere (span fields, events), for the secrets check.
    pub fn all_text(&self) -> Vec<String> {
        let state = self.lock();
        let spans = state
            .spans
            .values()
            .flat_map(|s| s.fields.values().cloned().chain(s.events.iter().flat_map(|e| e.fields.values().cloned())));
        spans.chain(state.orphans.iter().flat_map(|e| e.fields.values().cloned())).collect()
    }
}

struct Global(&'static Capture);

impl Subscriber for Global {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.target().starts_with("omni")
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let parent = match span.parent() {
            Some(parent) => Some(parent.into_u64()),
            None if span.is_contextual() => ENTERED.with(|e| e.borrow().last().copied()),
            None => None,
        };
        let mut fields = BTreeMap::new();
        span.record(&mut Values(&mut fields));
        let metadata = span.metadata();
        let mut state = self.0.lock();
        state.next += 1;
        let id = state.next;
        let record = SpanRecord {
            id,
            name: metadata.name(),
            target: metadata.target(),
            parent,
            declared: metadata.fields().iter().map(|f| f.name()).collect(),
            fields,
            undeclared: Vec::new(),
            events: Vec::new(),
            closed: false,
            refs: 1,
            metadata,
        };
        state.spans.insert(id, record);
        Id::from_u64(id)
    }

    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut recorded = BTreeMap::new();
        values.record(&mut Values(&mut recorded));
        let mut state = self.0.lock();
        if let Some(record) = state.spans.get_mut(&span.into_u64()) {
            for (name, value) in recorded {
                if !record.declared.contains(&name.as_str()) {
                    record.undeclared.push(name.clone());
                }
                record.fields.insert(name, value);
            }
        }
    }

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let parent = match event.parent() {
            Some(parent) => Some(parent.into_u64()),
            None if event.is_contextual() => ENTERED.with(|e| e.borrow().last().copied()),
            None => None,
        };
        let mut fields = BTreeMap::new();
        event.record(&mut Values(&mut fields));
        let record = EventRecord { level: *event.metadata().level(), fields };
        let mut state = self.0.lock();
        match parent.and_then(|p| state.spans.get_mut(&p)) {
            Some(span) => span.events.push(record),
            None => state.orphans.push(record),
        }
    }

    fn enter(&self, span: &Id) {
        ENTERED.with(|e| e.borrow_mut().push(span.into_u64()));
    }

    fn exit(&self, span: &Id) {
        ENTERED.with(|e| {
            let mut entered = e.borrow_mut();
            if let Some(at) = entered.iter().rposition(|&id| id == span.into_u64()) {
                entered.remove(at);
            }
        });
    }

    fn clone_span(&self, span: &Id) -> Id {
        if let Some(record) = self.0.lock().spans.get_mut(&span.into_u64()) {
            record.refs += 1;
        }
        span.clone()
    }

    fn try_close(&self, span: Id) -> bool {
        let mut state = self.0.lock();
        let Some(record) = state.spans.get_mut(&span.into_u64()) else { return false };
        record.refs = record.refs.saturating_sub(1);
        if record.refs == 0 {
            record.closed = true;
            return true;
        }
        false
    }

    fn current_span(&self) -> tracing_core::span::Current {
        let state = self.0.lock();
        let current = ENTERED.with(|e| e.borrow().last().copied()).and_then(|id| state.spans.get(&id));
        match current {
            Some(span) => tracing_core::span::Current::new(Id::from_u64(span.id), span.metadata),
            None => tracing_core::span::Current::none(),
        }
    }
}
