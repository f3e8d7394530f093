//! A logger that keeps every record, at every level, for tests that prove a key never
//! reaches a log (the HTTP crates under the drivers log what they write at trace level).

use std::sync::Mutex;

/// A key shaped like Anthropic's, for those tests.
pub const KEY: &str = "sk-ant-api03-never-log-me";

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

/// Installs the capturing logger for this process, every level on. Panics if another
/// logger is installed: call it once, in a test binary of its own.
pub fn capture_all() {
    log::set_logger(&LOGS).expect("the only logger of this test binary");
    log::set_max_level(log::LevelFilter::Trace);
}

/// Checks the records so far: `target` logged something (so logging was really on), and
/// neither [`KEY`] nor any 6-byte piece of its secret part appears (ureq-proto logs
/// written bytes in rows of 16).
pub fn assert_key_not_logged(target: &str) {
    let logs = LOGS.0.lock().unwrap_or_else(|e| e.into_inner()).clone();
    assert!(logs.iter().any(|l| l.starts_with(target)), "trace logging of {target} was on");
    let all = logs.join("\n");
    assert!(!all.contains(KEY), "the key was logged");
    let pieces: Vec<&str> = (0..KEY.len() - 6).filter_map(|i| KEY.get(i..i + 6)).collect();
    assert!(!pieces.iter().any(|p| all.contains(p) && !"sk-ant-api03".contains(p)), "part of the key was logged");
}

/// Checks that no record so far holds `secret` or any 6-byte piece of it (the proxy
/// credentials of [`crate::connect_proxy::CREDENTIALS`], say).
pub fn assert_not_logged(secret: &str) {
    let all = LOGS.0.lock().unwrap_or_else(|e| e.into_inner()).join("\n");
    let pieces: Vec<&str> = (0..=secret.len().saturating_sub(6)).filter_map(|i| secret.get(i..i + 6)).collect();
    assert!(!pieces.iter().any(|p| all.contains(p)), "part of a secret was logged");
}
