//! Many streams at once (issue 29), the client side: `N` calls of one case started
//! together from ONE client of each kind, every event of each read, each stream's deltas
//! and bytes counted on its own.
//!
//! - `floor`: `N` threads, each running the floor's work ([`floor::read_stream`]: its
//!   own blocking socket, 16 KiB reads, memchr framing, one borrowed decode per event).
//! - `tokio`, `tokio-current`: one `omni_tokio::Client`, cloned into `N` tasks
//!   (`tokio::spawn`) on a multi-thread runtime as `#[tokio::main]` builds it (one
//!   worker per core), or on a current-thread runtime.
//! - `smol`: one `omni_smol::Client`, cloned into `N` tasks on smol's global executor
//!   (`smol::spawn`; one executor thread unless `SMOL_THREADS` says otherwise), awaited
//!   from `smol::block_on`.
//! - `blocking`: one `omni_blocking::Client`, cloned into `N` threads, each iterating
//!   its call's stream.
//!
//! Every stream waits once at a barrier of `N` parties ([`Gate`]):
//!
//! - [`Gate::Delta`] (the default): once it has counted its first delta, before reading
//!   on. At that moment all `N` responses are open and streaming, so the peak resident
//!   set covers `N` streams in flight at once, whatever the scheduler does (without it,
//!   `N` floor threads started one after another could each finish before the last one
//!   starts), and each client holds what it reads ahead of an application that is not
//!   reading (the server keeps sending meanwhile).
//! - [`Gate::Start`]: before its call starts; then every stream reads as fast as it can.
//!   How many are in flight at once is then up to the scheduler (the server counts the
//!   connections open at once).
//!
//! A stream that fails or ends before its first delta passes the barrier when it ends,
//! so that the others are not held.

use std::fmt::Write as _;
use std::sync::{Arc, Barrier};
use std::thread;

use omni_conformance::heap::allocations;
use omni_conformance::wires::Wire;

use crate::case::{Case, ClientKind, Tally};
use crate::drivers::{count, model, options, PROMPT};
use crate::floor;

/// Where each stream waits for all the others (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    /// After its first delta: all `N` streams in flight at once, each paused once.
    Delta,
    /// Before its call starts: all start together, none pauses.
    Start,
}

impl Gate {
    /// Both, the default first.
    pub const ALL: [Self; 2] = [Self::Delta, Self::Start];

    /// The name on the command line and in the report.
    pub fn name(self) -> &'static str {
        match self {
            Self::Delta => "delta",
            Self::Start => "start",
        }
    }

    /// The gate of this name.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|g| g.name() == name)
    }
}

/// What a run of `streams` streams counted: each distinct (deltas, bytes) count with the
/// number of streams that had it, every failure's message, and the allocations of the
/// whole run (every thread, from before the client was built to the last stream's end).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Counts {
    /// Streams started.
    pub streams: u64,
    /// `(deltas, bytes, streams)`: each distinct count of a stream that ended well, and
    /// how many streams counted it; sorted.
    pub counts: Vec<(u64, u64, u64)>,
    /// Streams that failed, with the first failure's message.
    pub failed: u64,
    /// The first failure.
    pub failure: Option<String>,
    /// Allocations of the whole run.
    pub allocations: u64,
    /// The process's peak resident set since `exec` when the streams had ended
    /// ([`peak_rss_kb`]), KiB; 0 where unknown.
    pub peak_rss_kb: u64,
}

impl Counts {
    fn of(results: Vec<Result<Tally, String>>, allocations: u64) -> Self {
        let mut counts = Self { streams: results.len() as u64, allocations, ..Self::default() };
        for result in results {
            match result {
                Ok(tally) => match counts.counts.iter_mut().find(|(d, b, _)| (*d, *b) == (tally.deltas, tally.bytes)) {
                    Some(count) => count.2 += 1,
                    None => counts.counts.push((tally.deltas, tally.bytes, 1)),
                },
                Err(error) => {
                    counts.failed += 1;
                    counts.failure.get_or_insert(error);
                }
            }
        }
        counts.counts.sort_unstable();
        counts
    }

    /// Total deltas counted over every stream.
    pub fn deltas(&self) -> u64 {
        self.counts.iter().map(|(d, _, n)| d * n).sum()
    }

    /// Checks that every one of `streams` streams ended well and counted exactly
    /// `deltas` deltas of `bytes` bytes; otherwise says what each stream got.
    pub fn check(&self, streams: u64, deltas: u64, bytes: u64) -> Result<(), String> {
        let whole = self.streams == streams && self.failed == 0 && self.counts == [(deltas, bytes, streams)];
        if whole {
            return Ok(());
        }
        let mut got = String::new();
        for (d, b, n) in &self.counts {
            let _ = write!(got, "{n} streams {d} deltas/{b} bytes; ");
        }
        if self.failed > 0 {
            let _ = write!(got, "{} streams failed (first: {}); ", self.failed, self.failure.as_deref().unwrap_or("?"));
        }
        Err(format!(
            "{} streams started, expected {streams}, each {deltas} deltas/{bytes} bytes; got: {}",
            self.streams,
            got.trim_end_matches("; ")
        ))
    }

    /// The line the client binary prints (a failure's message goes to stderr).
    pub fn line(&self) -> String {
        let counts: Vec<String> = self.counts.iter().map(|(d, b, n)| format!("{d}/{b}x{n}")).collect();
        format!(
            "streams={} failed={} allocations={} rss_kb={} counts={}",
            self.streams,
            self.failed,
            self.allocations,
            self.peak_rss_kb,
            if counts.is_empty() { "-".to_string() } else { counts.join(",") }
        )
    }

    /// Reads a [`Counts::line`] (without the failure's message).
    pub fn parse(line: &str) -> Option<Self> {
        let mut counts = Self::default();
        let mut seen = 0;
        for field in line.split_whitespace() {
            let (name, value) = field.split_once('=')?;
            match name {
                "streams" => counts.streams = value.parse().ok()?,
                "failed" => counts.failed = value.parse().ok()?,
                "allocations" => counts.allocations = value.parse().ok()?,
                "rss_kb" => counts.peak_rss_kb = value.parse().ok()?,
                "counts" if value == "-" => {}
                "counts" => {
                    for count in value.split(',') {
                        let (db, n) = count.split_once('x')?;
                        let (d, b) = db.split_once('/')?;
                        counts.counts.push((d.parse().ok()?, b.parse().ok()?, n.parse().ok()?));
                    }
                }
                _ => return None,
            }
            seen += 1;
        }
        (seen == 5).then_some(counts)
    }
}

/// Runs `streams` streams of `case` at once against `base_url` with `client`, each
/// waiting for the others at `gate`.
pub fn run(client: ClientKind, case: Case, base_url: &str, streams: usize, gate: Gate) -> Result<Counts, String> {
    let before = allocations();
    let results = match client {
        ClientKind::Floor => floor_threads(case, base_url, streams, gate),
        ClientKind::Tokio => tokio_tasks(tokio::runtime::Builder::new_multi_thread(), case, base_url, streams, gate)?,
        ClientKind::TokioCurrent => {
            tokio_tasks(tokio::runtime::Builder::new_current_thread(), case, base_url, streams, gate)?
        }
        ClientKind::Smol => smol_tasks(case, base_url, streams, gate)?,
        ClientKind::Blocking => blocking_threads(case, base_url, streams, gate)?,
    };
    let mut counts = Counts::of(results, allocations() - before);
    counts.peak_rss_kb = peak_rss_kb().unwrap_or(0);
    Ok(counts)
}

/// The peak resident set of this process since it was `exec`uted (`VmHWM` in
/// `/proc/self/status`), KiB; `None` where there is no such file.
///
/// Why not the `ru_maxrss` the parent gets from `wait4`: Linux carries the high-water
/// mark of the address space a process had before `exec` over into it, and a child
/// spawned by std (`posix_spawn`, a `vfork`) had its parent's, so `ru_maxrss` is never
/// below the harness's own resident set (tens of MB once its server has run a thousand
/// connection threads), which would hide the clients' differences at few streams.
/// `VmHWM` is the high-water mark of the address space `exec` made.
pub fn peak_rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|line| line.strip_prefix("VmHWM:"))?;
    line.trim().trim_end_matches("kB").trim().parse().ok()
}

/// Joins scoped threads' results; a thread that panicked is a failed stream.
fn join_all<'scope>(
    handles: Vec<thread::ScopedJoinHandle<'scope, Result<Tally, String>>>,
) -> Vec<Result<Tally, String>> {
    handles.into_iter().map(|h| h.join().unwrap_or_else(|_| Err("the stream's thread panicked".into()))).collect()
}

fn floor_threads(case: Case, base_url: &str, streams: usize, gate: Gate) -> Vec<Result<Tally, String>> {
    let barrier = Barrier::new(streams);
    thread::scope(|scope| {
        let handles = (0..streams)
            .map(|_| {
                let barrier = &barrier;
                scope.spawn(move || {
                    let mut gated = gate == Gate::Start;
                    if gated {
                        barrier.wait();
                    }
                    let result = floor::read_stream(case, base_url, &mut || {
                        gated = true;
                        barrier.wait();
                    });
                    if !gated {
                        barrier.wait();
                    }
                    result.map_err(|e| e.to_string())
                })
            })
            .collect();
        join_all(handles)
    })
}

fn blocking_threads(
    case: Case,
    base_url: &str,
    streams: usize,
    gate: Gate,
) -> Result<Vec<Result<Tally, String>>, String> {
    let client = Wire(case.dialect()).apply(omni_blocking::Client::builder(), base_url).build().map_err(err)?;
    let barrier = Barrier::new(streams);
    Ok(thread::scope(|scope| {
        let handles = (0..streams)
            .map(|_| {
                let (client, barrier) = (client.clone(), &barrier);
                scope.spawn(move || {
                    let mut gated = gate == Gate::Start;
                    if gated {
                        barrier.wait();
                    }
                    let result = (|| {
                        let stream = client.call(model(case), PROMPT).options(options()).stream().map_err(err)?;
                        let (mut tally, mut finished) = (Tally::default(), false);
                        for event in stream {
                            finished |= count(case, &mut tally, &event)?;
                            if !gated && tally.deltas > 0 {
                                gated = true;
                                barrier.wait();
                            }
                        }
                        if !finished {
                            return Err("the stream ended without `Finished`".to_string());
                        }
                        Ok(tally)
                    })();
                    if !gated {
                        barrier.wait();
                    }
                    result
                })
            })
            .collect();
        join_all(handles)
    }))
}

/// One stream read from a tokio or smol call (`start`), through the barrier.
async fn read_async<E: std::fmt::Display>(
    case: Case,
    barrier: &smol::lock::Barrier,
    gate: Gate,
    start: impl FnOnce() -> Result<omni_tokio::TextStream, E>,
) -> Result<Tally, String> {
    let mut gated = gate == Gate::Start;
    if gated {
        barrier.wait().await;
    }
    let result = async {
        let mut stream = start().map_err(err)?;
        let (mut tally, mut finished) = (Tally::default(), false);
        while let Some(event) = stream.next().await {
            finished |= count(case, &mut tally, &event)?;
            if !gated && tally.deltas > 0 {
                gated = true;
                barrier.wait().await;
            }
        }
        if !finished {
            return Err("the stream ended without `Finished`".to_string());
        }
        Ok(tally)
    }
    .await;
    if !gated {
        barrier.wait().await;
    }
    result
}

fn tokio_tasks(
    mut builder: tokio::runtime::Builder,
    case: Case,
    base_url: &str,
    streams: usize,
    gate: Gate,
) -> Result<Vec<Result<Tally, String>>, String> {
    let runtime = builder.enable_all().build().map_err(err)?;
    runtime.block_on(async {
        let client = Wire(case.dialect()).apply(omni_tokio::Client::builder(), base_url).build().map_err(err)?;
        let barrier = Arc::new(smol::lock::Barrier::new(streams));
        let tasks: Vec<_> = (0..streams)
            .map(|_| {
                let (client, barrier) = (client.clone(), barrier.clone());
                tokio::spawn(async move {
                    read_async(case, &barrier, gate, || client.call(model(case), PROMPT).options(options()).stream())
                        .await
                })
            })
            .collect();
        let mut results = Vec::with_capacity(streams);
        for task in tasks {
            results.push(task.await.unwrap_or_else(|e| Err(format!("the stream's task failed: {e}"))));
        }
        Ok(results)
    })
}

fn smol_tasks(case: Case, base_url: &str, streams: usize, gate: Gate) -> Result<Vec<Result<Tally, String>>, String> {
    smol::block_on(async {
        let client = Wire(case.dialect()).apply(omni_smol::Client::builder(), base_url).build().map_err(err)?;
        let barrier = Arc::new(smol::lock::Barrier::new(streams));
        let tasks: Vec<_> = (0..streams)
            .map(|_| {
                let (client, barrier) = (client.clone(), barrier.clone());
                smol::spawn(async move {
                    read_async(case, &barrier, gate, || client.call(model(case), PROMPT).options(options()).stream())
                        .await
                })
            })
            .collect();
        let mut results = Vec::with_capacity(streams);
        for task in tasks {
            results.push(task.await);
        }
        Ok(results)
    })
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_back_and_check() {
        let tally = |deltas| Ok(Tally { deltas, bytes: deltas * 6, allocations: 0 });
        let whole = Counts::of(vec![tally(5), tally(5), tally(5)], 42);
        assert_eq!(Counts::parse(&whole.line()), Some(whole.clone()));
        assert_eq!(whole.check(3, 5, 30), Ok(()));
        assert_eq!(whole.deltas(), 15);
        assert!(whole.check(4, 5, 30).is_err());

        let short = Counts::of(vec![tally(5), tally(4), Err("reset".into())], 1);
        let back = Counts::parse(&short.line()).unwrap();
        assert_eq!((back.counts.clone(), back.failed), (vec![(4, 24, 1), (5, 30, 1)], 1));
        let message = short.check(3, 5, 30).unwrap_err();
        assert!(message.contains("1 streams 4 deltas/24 bytes") && message.contains("first: reset"), "{message}");

        let none = Counts::of(vec![Err("refused".into())], 0);
        assert_eq!(Counts::parse(&none.line()).map(|c| c.counts), Some(vec![]));
        assert_eq!(Counts::parse("streams=1 failed=0"), None);
        assert!(peak_rss_kb().is_some_and(|kb| kb > 0));
    }
}
