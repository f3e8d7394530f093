//! What the drivers' time-to-first-event benchmarks share (`benches/ttfe.rs` of
//! omni-tokio, omni-smol and omni-blocking): the call, the reply, the warm-up that
//! captures the request omni sends (so each baseline replays the very same bytes), the
//! first-delta marker the baselines look for, and the paired measurement that
//! interleaves omni and its baseline so that load drifting on a shared machine cannot
//! bias the ratio.

use std::time::{Duration, Instant};

use crate::replay::ReplayServer;
use crate::scenarios::{paced, text_events};
use crate::sim::Reply;

/// The model every driver's benchmark calls.
pub const MODEL: &str = "anthropic:claude-sonnet-4-5";
/// The prompt.
pub const PROMPT: &str = "Say hello.";
/// The text of [`reply`].
pub const REPLY_TEXT: &str = "Hello there, how are you?";
/// Samples per divan benchmark (one iteration each).
pub const SAMPLES: u32 = 300;
/// Pairs of the paired measurement.
pub const PAIRS: usize = 300;
/// Pause before each sample, outside the timed part, for the previous iteration's
/// leftovers (a cancelled call's tasks, the closing connection) to finish.
pub const SETTLE: Duration = Duration::from_millis(2);

/// The reply every request gets: a short Anthropic Messages text stream, no delay
/// between events.
pub fn reply() -> Reply {
    paced(&text_events(&["Hello", " there", ", how", " are", " you?"]), Duration::ZERO)
}

/// True under `cargo bench` (divan runs each benchmark once otherwise, as a test):
/// only then does a benchmark run its paired measurement after divan's table.
pub fn under_cargo_bench() -> bool {
    let args: Vec<String> = std::env::args().collect();
    args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--test" || a == "--list")
}

/// A request exactly as omni sent it, replayed by a baseline.
#[derive(Debug, Clone)]
pub struct Captured {
    /// Absolute URL.
    pub url: String,
    /// Headers, without those the HTTP client adds itself (host, framing, connection).
    pub headers: Vec<(String, String)>,
    /// Body.
    pub body: Vec<u8>,
}

impl Captured {
    /// The last request `server` received (the warm-up call's).
    pub fn last_request(server: &ReplayServer) -> Self {
        let recorded = server.requests().pop().expect("the warm-up request");
        let skip = ["host", "content-length", "connection", "transfer-encoding"];
        Self {
            url: format!("{}{}", server.base_url(), recorded.path),
            headers: recorded.raw_headers().iter().filter(|(n, _)| !skip.contains(&n.as_str())).cloned().collect(),
            body: recorded.body,
        }
    }
}

/// Appends `chunk` to `seen` and looks for the first text delta's marker in the new
/// bytes (plus the marker's length minus one before them, in case it straddles two
/// chunks): what a baseline reads until, parsing nothing.
pub fn contains_text_delta(seen: &mut Vec<u8>, chunk: &[u8]) -> bool {
    const MARKER: &[u8] = b"\"text_delta\"";
    let from = seen.len().saturating_sub(MARKER.len() - 1);
    seen.extend_from_slice(chunk);
    seen.get(from..).unwrap_or_default().windows(MARKER.len()).any(|w| w == MARKER)
}

/// The same measurement with omni and the baseline interleaved (alternating which goes
/// first), so that the machine's load drifting between two divan benchmarks cannot bias
/// the ratio. Prints the medians, quartiles and `omni / baseline` of the medians. The
/// drop of what each returns is timed too (it is cheap: a channel or socket close).
pub fn paired(name: &str, prepare: impl Fn(), omni: impl Fn(), baseline: impl Fn()) {
    compare(name, ["omni", "baseline"], prepare, omni, baseline);
}

/// [`paired`] with other names for the two sides: prints `a / b` of the medians.
pub fn compare(name: &str, [a, b]: [&str; 2], prepare: impl Fn(), omni: impl Fn(), baseline: impl Fn()) {
    let (mut omni_times, mut baseline_times) = (Vec::new(), Vec::new());
    for i in 0..PAIRS {
        let timed = |f: &dyn Fn(), into: &mut Vec<Duration>| {
            prepare();
            let started = Instant::now();
            f();
            into.push(started.elapsed());
        };
        if i % 2 == 0 {
            timed(&omni, &mut omni_times);
            timed(&baseline, &mut baseline_times);
        } else {
            timed(&baseline, &mut baseline_times);
            timed(&omni, &mut omni_times);
        }
    }
    let (o, q) = (quantiles(&mut omni_times), quantiles(&mut baseline_times));
    println!(
        "paired {name}, {PAIRS} pairs: {a} {}, {b} {}; {a}/{b}: median {:.2}, fastest {:.2}",
        show(o),
        show(q),
        o[2] / q[2],
        o[0] / q[0]
    );
}

/// Fastest, p25, median, p75, in µs.
fn quantiles(times: &mut [Duration]) -> [f64; 4] {
    times.sort();
    let at = |q: usize| times[(times.len() - 1) * q / 4].as_secs_f64() * 1e6;
    [at(0), at(1), at(2), at(3)]
}

fn show(q: [f64; 4]) -> String {
    format!("median {:.0} µs (fastest {:.0}, p25 {:.0}, p75 {:.0})", q[2], q[0], q[1], q[3])
}
