//! The measurement: each client in a child process of its own, one call each, rounds
//! interleaved, medians and ratios to the floor.

use std::fmt::Write as _;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::case::{Case, ClientKind, Scale, Tally};
use crate::rusage;
use crate::server::Server;

/// Longest one client may take before it is killed and the run fails.
pub const RUN_LIMIT: Duration = Duration::from_secs(300);

/// One client's run of one case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Run {
    /// What the client counted.
    pub tally: Tally,
    /// Its whole-process CPU time (user + system).
    pub cpu: Duration,
    /// From just before the child was spawned to its request having arrived whole.
    pub startup: Duration,
}

/// Runs `client` on `case` in a child process (`exe`, the client binary) against
/// `server`, which must already serve the case's body.
pub fn run_once(exe: &Path, server: &Server, client: ClientKind, case: Case) -> Result<Run, String> {
    let _ = server.arrivals();
    let spawned = Instant::now();
    let child = run_child(exe, &[client.name(), case.name(), &server.base_url()], RUN_LIMIT)
        .map_err(|e| format!("{client} {case}: {e}"))?;
    let (exit, stdout) = (child.exit, child.stdout);
    if !exit.success {
        return Err(format!("{client} {case}: wait status {}: {}{}", exit.status, stdout.trim(), child.stderr.trim()));
    }
    let tally = Tally::parse(stdout.trim()).ok_or_else(|| format!("{client} {case}: unreadable output {stdout:?}"))?;
    let arrivals = server.arrivals();
    let [arrival] = arrivals.as_slice() else {
        return Err(format!("{client} {case}: {} requests instead of one", arrivals.len()));
    };
    Ok(Run { tally, cpu: exit.cpu, startup: arrival.at.saturating_duration_since(spawned) })
}

/// A child process that ended: the kernel's account of it, and what it printed.
#[derive(Debug, Clone)]
pub struct Finished {
    /// Its exit status, CPU time and peak resident set.
    pub exit: rusage::Exit,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
    /// From just before it was spawned to its having been reaped.
    pub wall: Duration,
}

/// Runs `exe` with `args` to its end (killed after `limit`), its output read as it
/// comes (so that a child writing more than a pipe holds never waits for the parent),
/// and reaps it with `wait4` for its CPU time and peak resident set.
pub fn run_child(exe: &Path, args: &[&str], limit: Duration) -> Result<Finished, String> {
    let spawned = Instant::now();
    let mut child = Command::new(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
    let read_all = |pipe: Option<Box<dyn Read + Send>>| {
        thread::spawn(move || {
            let mut text = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut text);
            }
            String::from_utf8_lossy(&text).into_owned()
        })
    };
    let stdout = read_all(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let stderr = read_all(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let (sender, exited) = mpsc::channel();
    let pid = child.id();
    thread::spawn(move || sender.send(rusage::wait(pid)));
    let exit = match exited.recv_timeout(limit) {
        Ok(exit) => exit,
        Err(_) => {
            let _ = child.kill();
            let _ = exited.recv();
            return Err(format!("killed after {limit:?}"));
        }
    }
    .map_err(|e| format!("wait4: {e}"))?;
    let wall = spawned.elapsed();
    let (stdout, stderr) = (stdout.join().unwrap_or_default(), stderr.join().unwrap_or_default());
    Ok(Finished { exit, stdout, stderr, wall })
}

/// Every run of one case: `runs[c]` holds client `clients[c]`'s runs, one per round.
#[derive(Debug, Clone)]
pub struct CaseRuns {
    /// The case.
    pub case: Case,
    /// The clients, the floor first.
    pub clients: Vec<ClientKind>,
    /// Their runs.
    pub runs: Vec<Vec<Run>>,
}

/// Runs `case` for `rounds` rounds; each round runs every client once, in an order
/// rotated by one each round, so that a drift of the machine's load spreads over all.
pub fn run_case(
    exe: &Path,
    server: &Server,
    case: Case,
    scale: Scale,
    clients: &[ClientKind],
    rounds: usize,
) -> Result<CaseRuns, String> {
    server.serve(&case.body(scale));
    let mut runs = vec![Vec::with_capacity(rounds); clients.len()];
    for round in 0..rounds {
        for i in 0..clients.len() {
            let c = (i + round) % clients.len();
            runs[c].push(run_once(exe, server, clients[c], case)?);
        }
    }
    Ok(CaseRuns { case, clients: clients.to_vec(), runs })
}

/// The median of `values` (the lower middle one for an even count).
pub fn median<T: Ord + Copy>(values: impl IntoIterator<Item = T>) -> Option<T> {
    let mut values: Vec<T> = values.into_iter().collect();
    values.sort_unstable();
    values.get(values.len().saturating_sub(1) / 2).copied()
}

/// One client's medians in one case.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// The client.
    pub client: ClientKind,
    /// Deltas counted (the same in every round, else the first round's).
    pub deltas: u64,
    /// Median CPU time, µs per delta.
    pub cpu_per_delta_us: f64,
    /// Median CPU time over the floor's median CPU time.
    pub ratio: f64,
    /// Median allocations per delta.
    pub allocations_per_delta: f64,
    /// Median start-up to first request, ms.
    pub startup_ms: f64,
}

impl CaseRuns {
    /// The medians of each client, the ratio against the floor (the first client).
    pub fn summaries(&self) -> Vec<Summary> {
        let median_cpu = |runs: &[Run]| median(runs.iter().map(|r| r.cpu)).unwrap_or_default();
        let floor = self.runs.first().map(|r| median_cpu(r)).unwrap_or_default().as_secs_f64();
        self.clients
            .iter()
            .zip(&self.runs)
            .map(|(&client, runs)| {
                let deltas = runs.first().map_or(0, |r| r.tally.deltas);
                let per = |x: f64| if deltas == 0 { 0.0 } else { x / deltas as f64 };
                let cpu = median_cpu(runs).as_secs_f64();
                Summary {
                    client,
                    deltas,
                    cpu_per_delta_us: per(cpu * 1e6),
                    ratio: if floor > 0.0 { cpu / floor } else { 0.0 },
                    allocations_per_delta: per(median(runs.iter().map(|r| r.tally.allocations)).unwrap_or(0) as f64),
                    startup_ms: median(runs.iter().map(|r| r.startup)).unwrap_or_default().as_secs_f64() * 1e3,
                }
            })
            .collect()
    }

    /// Every client's counts that differ from the floor's, as messages (none when all
    /// counted the same deltas and bytes in every round).
    pub fn disagreements(&self) -> Vec<String> {
        let Some(floor) = self.runs.first().and_then(|r| r.first()).map(|r| r.tally) else {
            return vec![format!("{}: no floor run", self.case)];
        };
        let mut found = Vec::new();
        for (client, runs) in self.clients.iter().zip(&self.runs) {
            for (round, run) in runs.iter().enumerate() {
                if (run.tally.deltas, run.tally.bytes) != (floor.deltas, floor.bytes) {
                    found.push(format!(
                        "{} {client} round {round}: {} deltas, {} bytes; the floor: {} deltas, {} bytes",
                        self.case, run.tally.deltas, run.tally.bytes, floor.deltas, floor.bytes
                    ));
                }
            }
        }
        found
    }
}

/// The table of every case's summaries, one row per case and client.
pub fn table(cases: &[CaseRuns]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| case | client | deltas | CPU µs/delta | × floor | allocations/delta | start-up ms |\n|---|---|---:|---:|---:|---:|---:|"
    );
    for case in cases {
        for s in case.summaries() {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.3} | {:.2} | {:.2} | {:.2} |",
                case.case, s.client, s.deltas, s.cpu_per_delta_us, s.ratio, s.allocations_per_delta, s.startup_ms
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_is_the_middle_value() {
        assert_eq!(median([5, 1, 3]), Some(3));
        assert_eq!(median([4, 1, 3, 2]), Some(2));
        assert_eq!(median(Vec::<u32>::new()), None);
    }

    fn run(cpu_ms: u64, deltas: u64) -> Run {
        Run {
            tally: Tally { deltas, bytes: deltas * 6, allocations: deltas * 2 },
            cpu: Duration::from_millis(cpu_ms),
            startup: Duration::from_millis(1),
        }
    }

    #[test]
    fn ratios_are_medians_over_the_floors_median() {
        let runs = CaseRuns {
            case: Case::OpenaiText,
            clients: vec![ClientKind::Floor, ClientKind::Tokio],
            runs: vec![vec![run(10, 100), run(30, 100), run(12, 100)], vec![run(20, 100), run(90, 100), run(24, 100)]],
        };
        let summaries = runs.summaries();
        assert_eq!(summaries[1].ratio, 2.0);
        assert_eq!(summaries[1].cpu_per_delta_us, 240.0);
        assert_eq!(summaries[1].allocations_per_delta, 2.0);
        assert!(runs.disagreements().is_empty());
        let wrong = CaseRuns { runs: vec![vec![run(10, 100)], vec![run(10, 99)]], ..runs };
        assert_eq!(wrong.disagreements().len(), 1);
    }
}
