//! `cargo run --release -p omni-bench --example serve -- <case>`: serves `case`'s body
//! (at full scale, or `DELTAS` deltas) to every request until killed, and prints the base URL, so that one client
//! run can be profiled alone (`valgrind --tool=callgrind omni-bench-client tokio-current
//! openai-text <url>`, or `perf record`), or many streams at once (`omni-bench-client
//! tokio openai-text <url> 1000`).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use omni_bench::case::{Case, Scale};
use omni_bench::server::Server;

fn main() {
    let case = std::env::args().nth(1).and_then(|name| Case::parse(&name)).unwrap_or(Case::OpenaiText);
    // Every connection on a thread of its own, so that a client's many streams at once
    // (`omni-bench-client <client> <case> <url> <streams>`) are served together.
    let server = Server::start_concurrent().expect("a loopback port");
    // `DELTAS` scales the body down, to profile what is not per delta (start-up).
    let scale = std::env::var("DELTAS").ok().and_then(|n| n.parse().ok()).map_or(Scale::FULL, Scale::with_deltas);
    server.serve(&case.body(scale));
    println!("{}", server.base_url());
    loop {
        std::thread::park();
    }
}
