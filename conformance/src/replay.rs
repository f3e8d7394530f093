//! The replay server the suites run drivers against: omni-testkit's [`MockServer`](omni_testkit::http::MockServer)
//! (the kit's HTTP level, with its `tls` feature), under the name the suites use.

pub use omni_testkit::http::{MockServer as ReplayServer, RecordedRequest};
