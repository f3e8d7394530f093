//! The mock provider through omni-blocking: every case of every dialect.

mod common;

use omni_blocking::Client;
use omni_testkit::MockProvider;

fn run(dialect: omni_blocking::Dialect, case: common::Case) -> Result<(), String> {
    let mock = common::mock(dialect, case.turns)?;
    let client = Client::builder()
        .provider(mock.provider())
        .stall_timeout(common::STALL)
        .retry(common::retry())
        .build()
        .map_err(|e| e.to_string())?;
    let outcome = client.call(mock.model(), common::PROMPT).options(case.options).generate();
    (case.check)(&mock, &outcome).map_err(|e| format!("{}: {e}", case.name))
}

#[test]
fn every_case_of_every_dialect() {
    let failures: Vec<String> = common::cases().into_iter().filter_map(|(d, case)| run(d, case).err()).collect();
    common::report(failures).unwrap_or_else(|report| panic!("{report}"));
}

#[test]
fn a_stall_ends_by_the_stall_limit() {
    let dialect = omni_blocking::Dialect::OllamaChat;
    run(dialect, common::stall(dialect)).unwrap_or_else(|report| panic!("{report}"));
}

#[test]
fn a_keyed_mock_sees_the_key_where_the_dialect_sends_it() {
    use omni_blocking::Dialect;
    use omni_testkit::{Turn, PROVIDER_ID};
    for dialect in
        [Dialect::AnthropicMessages, Dialect::OpenaiCompletions, Dialect::OpenaiResponses, Dialect::GoogleGemini]
    {
        let mock = MockProvider::start(dialect).expect("a loopback port").with_key("sk-mock-right");
        mock.push(Turn::text("ok"));
        let client =
            Client::builder().provider(mock.provider()).api_key(PROVIDER_ID, "sk-mock-right").build().expect("client");
        client.generate_text(mock.model(), "Hi").expect("a reply");
        assert!(mock.sent_key(), "{dialect:?}: {:?}", mock.requests());
        assert!(!format!("{:?}", mock.requests()).contains("sk-mock-right"), "a printed request hides the key");

        mock.push(Turn::text("ok"));
        let wrong =
            Client::builder().provider(mock.provider()).api_key(PROVIDER_ID, "sk-mock-wrong").build().expect("client");
        wrong.generate_text(mock.model(), "Hi").expect("a reply");
        assert!(!mock.sent_key(), "{dialect:?}: the second request carried another key");
    }
    // Ollama takes no key: none is sent.
    let mock = MockProvider::start(Dialect::OllamaChat).expect("a loopback port").with_key("sk-unused");
    mock.push(Turn::text("ok"));
    let client = Client::builder().provider(mock.provider()).build().expect("client");
    client.generate_text(mock.model(), "Hi").expect("a reply");
    assert!(mock.sent_key());
}
