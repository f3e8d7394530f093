//! The key never reaches a log record, even with every crate logging at trace level
//! (ureq-proto logs the bytes it writes at that level).
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::sync::Mutex;

use omni_conformance::replay::ReplayServer;
use omni_conformance::scenarios::{self, paced, text_events};
use omni_smol::{Client, Options};

const KEY: &str = "sk-ant-api03-never-log-me";

struct Capture(Mutex<Vec<String>>);

impl log::Log for Capture {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }
    fn log(&self, record: &log::Record) {
        let line = format!("{} {}", record.target(), record.args());
        self.0.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    }
    fn flush(&self) {}
}

static LOGS: Capture = Capture(Mutex::new(Vec::new()));

#[test]
fn the_key_is_sent_but_never_logged() {
    log::set_logger(&LOGS).expect("the only logger of this test binary");
    log::set_max_level(log::LevelFilter::Trace);
    let server = ReplayServer::start(vec![paced(&text_events(&["Hi"]), std::time::Duration::ZERO)]).expect("server");
    let client = Client::builder()
        .base_url("anthropic", format!("{}/v1", server.base_url()))
        .api_key("anthropic", KEY)
        .build()
        .expect("client");
    let response = smol::block_on(client.generate_text(scenarios::model(), "hi", Options::default())).expect("reply");
    assert_eq!(response.text(), "Hi");
    assert_eq!(server.requests()[0].header("x-api-key"), Some(KEY), "the key was sent");
    let logs = LOGS.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(logs.iter().any(|l| l.starts_with("ureq_proto")), "trace logging of the HTTP layer was on");
    // ureq-proto logs written bytes in rows of 16: look for any 6-byte piece of the key too.
    let all = logs.join("\n");
    assert!(!all.contains(KEY), "the key was logged");
    let pieces: Vec<&str> = (0..KEY.len() - 6).filter_map(|i| KEY.get(i..i + 6)).collect();
    assert!(!pieces.iter().any(|p| all.contains(p) && !"sk-ant-api03".contains(p)), "part of the key was logged");
}
