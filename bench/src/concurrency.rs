//! Many streams at once (issue 29), the measurement: for each case, `ROUNDS` rounds;
//! each round runs, for each number of streams `N`, every client once (the order rotated
//! by one each round), each in a fresh child process (`omni-bench-client <client> <case>
//! <base_url> <N> <gate>`, see [`crate::many`]) against a server that serves every connection
//! at once ([`Server::start_concurrent`]). The kernel's account of the child when it is
//! reaped gives its whole-process CPU (user + system); its peak resident set is the
//! `VmHWM` the child reads of itself once its streams have ended (see
//! [`crate::many::peak_rss_kb`] for why not `ru_maxrss`). A run fails unless every one of its `N` streams counted exactly the
//! case's deltas and bytes, and the server saw exactly `N` requests.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use crate::case::{Case, ClientKind, Scale};
use crate::harness::{median, run_child, RUN_LIMIT};
use crate::many::{Counts, Gate};
use crate::server::Server;

/// One child's run of `N` streams.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamsRun {
    /// What its streams counted.
    pub counts: Counts,
    /// Whole-process CPU (user + system).
    pub cpu: Duration,
    /// Peak resident set, KiB: the child's `VmHWM` when its streams had ended
    /// ([`crate::many::peak_rss_kb`]), else `ru_maxrss` (which also counts the harness's
    /// own resident set at the spawn).
    pub max_rss_kb: u64,
    /// `ru_maxrss` from `wait4`, KiB (for comparison: never below the harness's resident
    /// set when it spawned the child).
    pub ru_maxrss_kb: u64,
    /// From spawn to reaping.
    pub wall: Duration,
    /// The most connections the server had open at once during the run.
    pub peak_connections: usize,
}

/// Runs `streams` streams of `case` by `client` in a child process (`exe`) against
/// `server` (concurrent, already serving the case's body at `scale`), and checks that
/// each stream was received whole.
pub fn run_streams(
    exe: &Path,
    server: &Server,
    client: ClientKind,
    case: Case,
    scale: Scale,
    streams: usize,
    gate: Gate,
) -> Result<StreamsRun, String> {
    let label = format!("{client} {case} N={streams} (gate {})", gate.name());
    let _ = server.arrivals();
    let _ = server.peak_connections();
    let n = streams.to_string();
    let child = run_child(exe, &[client.name(), case.name(), &server.base_url(), &n, gate.name()], RUN_LIMIT)
        .map_err(|e| format!("{label}: {e}"))?;
    let peak_connections = server.peak_connections();
    let requests = server.arrivals().len();
    if !child.exit.success {
        return Err(format!(
            "{label}: wait status {} after {:.1} s: {}{}",
            child.exit.status,
            child.wall.as_secs_f64(),
            child.stdout.trim(),
            child.stderr.trim()
        ));
    }
    let counts =
        Counts::parse(child.stdout.trim()).ok_or_else(|| format!("{label}: unreadable output {:?}", child.stdout))?;
    let (deltas, bytes) = case.expected(scale);
    counts.check(streams as u64, deltas, bytes).map_err(|e| format!("{label}: streams not received whole: {e}"))?;
    if requests != streams {
        return Err(format!("{label}: the server saw {requests} requests for {streams} streams"));
    }
    let max_rss_kb = if counts.peak_rss_kb > 0 { counts.peak_rss_kb } else { child.exit.max_rss_kb };
    let ru_maxrss_kb = child.exit.max_rss_kb;
    Ok(StreamsRun { counts, cpu: child.exit.cpu, max_rss_kb, ru_maxrss_kb, wall: child.wall, peak_connections })
}

/// Every run of one case: `runs[c][s]` holds client `clients[c]`'s runs of `streams[s]`
/// streams, one per round.
#[derive(Debug, Clone)]
pub struct CaseRuns {
    /// The case.
    pub case: Case,
    /// Where the streams waited for each other.
    pub gate: Gate,
    /// Deltas per stream.
    pub deltas: u64,
    /// Bytes of each stream's response body.
    pub body_bytes: usize,
    /// The clients.
    pub clients: Vec<ClientKind>,
    /// The numbers of streams, ascending.
    pub streams: Vec<usize>,
    /// The runs.
    pub runs: Vec<Vec<Vec<StreamsRun>>>,
}

/// What to run of each case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// How long each stream is.
    pub scale: Scale,
    /// The clients.
    pub clients: Vec<ClientKind>,
    /// The numbers of streams at once, ascending.
    pub streams: Vec<usize>,
    /// Where the streams wait for each other.
    pub gate: Gate,
    /// Rounds.
    pub rounds: usize,
}

/// Runs `case` for `plan.rounds` rounds: each round, for each number of streams
/// (ascending), every client once in an order rotated by one each round. `progress`
/// gets a line per run. The first failure ends it.
pub fn run_case(
    exe: &Path,
    server: &Server,
    case: Case,
    plan: &Plan,
    progress: &mut dyn FnMut(&str),
) -> Result<CaseRuns, String> {
    let Plan { scale, ref clients, ref streams, gate, rounds } = *plan;
    let body = case.body(scale);
    server.serve(&body);
    let mut runs = vec![vec![Vec::with_capacity(rounds); streams.len()]; clients.len()];
    for round in 0..rounds {
        for (s, &n) in streams.iter().enumerate() {
            for i in 0..clients.len() {
                let c = (i + round) % clients.len();
                let run = run_streams(exe, server, clients[c], case, scale, n, gate)?;
                progress(&format!(
                    "{case} round {} N={n} {}: CPU {:.3} s, peak RSS {:.1} MB (ru_maxrss {:.1} MB), wall {:.2} s, {} connections at once",
                    round + 1,
                    clients[c],
                    run.cpu.as_secs_f64(),
                    run.max_rss_kb as f64 / 1024.0,
                    run.ru_maxrss_kb as f64 / 1024.0,
                    run.wall.as_secs_f64(),
                    run.peak_connections
                ));
                runs[c][s].push(run);
            }
        }
    }
    let deltas = case.expected(scale).0;
    Ok(CaseRuns {
        case,
        gate,
        deltas,
        body_bytes: body.len(),
        clients: clients.clone(),
        streams: streams.clone(),
        runs,
    })
}

/// One client's medians at one number of streams.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Row {
    /// The client.
    pub client: ClientKind,
    /// Streams at once.
    pub streams: usize,
    /// Median whole-process CPU ÷ (streams × deltas per stream), ns.
    pub cpu_ns_per_delta: f64,
    /// Median CPU over the floor's median CPU at the same number of streams.
    pub ratio: Option<f64>,
    /// Median peak resident set, MiB.
    pub rss_mb: f64,
    /// Median peak resident set ÷ streams, KiB.
    pub rss_kb_per_stream: f64,
    /// (Median peak resident set − the same client's at one stream) ÷ (streams − 1), KiB.
    pub rss_kb_above_one: Option<f64>,
    /// Median wall time of the child, ms.
    pub wall_ms: f64,
    /// Median allocations of the whole run ÷ (streams × deltas per stream).
    pub allocations_per_delta: f64,
    /// The fewest connections the server had open at once in any round.
    pub connections: usize,
}

impl CaseRuns {
    fn median_cpu(&self, c: usize, s: usize) -> Duration {
        median(self.runs[c][s].iter().map(|r| r.cpu)).unwrap_or_default()
    }

    fn median_rss(&self, c: usize, s: usize) -> u64 {
        median(self.runs[c][s].iter().map(|r| r.max_rss_kb)).unwrap_or_default()
    }

    /// Every client's row at every number of streams (client-major).
    pub fn rows(&self) -> Vec<Row> {
        let floor = self.clients.iter().position(|&c| c == ClientKind::Floor);
        let one = self.streams.iter().position(|&n| n == 1);
        let mut rows = Vec::new();
        for (c, &client) in self.clients.iter().enumerate() {
            for (s, &n) in self.streams.iter().enumerate() {
                let cpu = self.median_cpu(c, s).as_secs_f64();
                let total = (n as u64 * self.deltas).max(1) as f64;
                let rss = self.median_rss(c, s) as f64;
                let floor_cpu = floor.map(|f| self.median_cpu(f, s).as_secs_f64());
                rows.push(Row {
                    client,
                    streams: n,
                    cpu_ns_per_delta: cpu * 1e9 / total,
                    ratio: floor_cpu.filter(|&f| f > 0.0).map(|f| cpu / f),
                    rss_mb: rss / 1024.0,
                    rss_kb_per_stream: rss / n.max(1) as f64,
                    rss_kb_above_one: one
                        .filter(|_| n > 1)
                        .map(|o| (rss - self.median_rss(c, o) as f64) / (n - 1) as f64),
                    wall_ms: median(self.runs[c][s].iter().map(|r| r.wall)).unwrap_or_default().as_secs_f64() * 1e3,
                    allocations_per_delta: median(self.runs[c][s].iter().map(|r| r.counts.allocations))
                        .unwrap_or_default() as f64
                        / total,
                    connections: self.runs[c][s].iter().map(|r| r.peak_connections).min().unwrap_or(0),
                });
            }
        }
        rows
    }

    /// The numbers of streams the growth of the cost per delta is taken between: the
    /// most streams, and 10 if measured and fewer (else the fewest); `None` with one
    /// number only.
    pub fn growth_span(&self) -> Option<(usize, usize)> {
        let top = *self.streams.iter().max()?;
        let base = if top > 10 && self.streams.contains(&10) { 10 } else { *self.streams.iter().min()? };
        (top > base).then_some((base, top))
    }
}

fn or_dash(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "—".to_string(), |v| format!("{v:.decimals$}"))
}

/// The short table: per case and client, at the most streams, × floor, the growth of the
/// cost per delta from 10 (or the fewest) streams and from the next fewer number of
/// streams measured (at 10 streams a process's start-up is still a visible part of the
/// cost per delta, at 100 it is not), and the resident set per stream.
pub fn summary_table(cases: &[CaseRuns]) -> String {
    let mut out = String::new();
    let span = cases.iter().find_map(CaseRuns::growth_span);
    let (base, top) = span.unwrap_or((0, 0));
    let next = cases.iter().find_map(|case| case.streams.iter().copied().filter(|&n| n < top).max()).unwrap_or(base);
    let _ = writeln!(
        out,
        "| case | gate | client | × floor, N={top} | ns/delta N={top} ÷ N={base} | ns/delta N={top} ÷ N={next} | KB/stream at N={top} | KB/stream above N=1, N={top} |\n|---|---|---|---:|---:|---:|---:|---:|"
    );
    for case in cases {
        let rows = case.rows();
        for &client in &case.clients {
            let at = |n: usize| rows.iter().find(|r| r.client == client && r.streams == n);
            let Some(high) = at(top) else { continue };
            let growth = |n: usize| {
                at(n)
                    .filter(|l| l.cpu_ns_per_delta > 0.0 && n < top)
                    .map(|l| high.cpu_ns_per_delta / l.cpu_ns_per_delta)
            };
            let _ = writeln!(
                out,
                "| {} | {} | {client} | {} | {} | {} | {:.0} | {} |",
                case.case,
                case.gate.name(),
                or_dash(high.ratio, 2),
                or_dash(growth(base), 2),
                or_dash(growth(next), 2),
                high.rss_kb_per_stream,
                or_dash(high.rss_kb_above_one, 0)
            );
        }
    }
    out
}

/// One case's full table: a row per client and number of streams.
pub fn case_table(case: &CaseRuns) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} ({} deltas and {} bytes of body per stream, gate {}):\n\n| client | N | CPU ns/delta | × floor | peak RSS MB | RSS KB/stream | KB/stream above N=1 | allocations/delta | wall ms | at once |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        case.case,
        case.deltas,
        case.body_bytes,
        case.gate.name()
    );
    for row in case.rows() {
        let _ = writeln!(
            out,
            "| {} | {} | {:.0} | {} | {:.1} | {:.0} | {} | {:.3} | {:.0} | {} |",
            row.client,
            row.streams,
            row.cpu_ns_per_delta,
            or_dash(row.ratio, 2),
            row.rss_mb,
            row.rss_kb_per_stream,
            or_dash(row.rss_kb_above_one, 0),
            row.allocations_per_delta,
            row.wall_ms,
            row.connections
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(cpu_ms: u64, rss_kb: u64) -> StreamsRun {
        StreamsRun {
            counts: Counts { streams: 1, counts: vec![(100, 600, 1)], ..Counts::default() },
            cpu: Duration::from_millis(cpu_ms),
            max_rss_kb: rss_kb,
            ru_maxrss_kb: rss_kb,
            wall: Duration::from_millis(5),
            peak_connections: 1,
        }
    }

    #[test]
    fn rows_divide_by_streams_and_deltas() {
        let runs = CaseRuns {
            case: Case::OpenaiText,
            gate: Gate::Delta,
            deltas: 100,
            body_bytes: 20_000,
            clients: vec![ClientKind::Floor, ClientKind::Tokio],
            streams: vec![1, 10],
            runs: vec![
                vec![vec![run(1, 2_000)], vec![run(10, 2_900)]],
                vec![vec![run(2, 3_000)], vec![run(30, 12_000)]],
            ],
        };
        let rows = runs.rows();
        let tokio_10 = rows.iter().find(|r| r.client == ClientKind::Tokio && r.streams == 10).unwrap();
        // 30 ms over 10 × 100 deltas.
        assert!((tokio_10.cpu_ns_per_delta - 30_000.0).abs() < 1e-6);
        assert_eq!(tokio_10.ratio, Some(3.0));
        assert_eq!(tokio_10.rss_kb_per_stream, 1_200.0);
        assert_eq!(tokio_10.rss_kb_above_one, Some(1_000.0));
        let tokio_1 = rows.iter().find(|r| r.client == ClientKind::Tokio && r.streams == 1).unwrap();
        assert_eq!(tokio_1.rss_kb_above_one, None);
        assert_eq!(runs.growth_span(), Some((1, 10)));
        let table = summary_table(&[runs]);
        // tokio: 30,000 ns/delta at 10 streams, 20,000 at 1.
        assert!(table.contains("| openai-text | delta | tokio | 3.00 | 1.50 | 1.50 | 1200 | 1000 |"), "{table}");
    }
}
