//! The mock provider through omni-tokio: every case of every dialect.

mod common;

use omni_tokio::Client;

async fn run(dialect: omni_tokio::Dialect, case: common::Case) -> Result<(), String> {
    let mock = common::mock(dialect, case.turns)?;
    let client = Client::builder()
        .provider(mock.provider())
        .stall_timeout(common::STALL)
        .retry(common::retry())
        .build()
        .map_err(|e| e.to_string())?;
    let outcome = client.call(mock.model(), common::PROMPT).options(case.options).generate().await;
    (case.check)(&mock, &outcome).map_err(|e| format!("{}: {e}", case.name))
}

#[tokio::test]
async fn every_case_of_every_dialect() {
    let mut failures = Vec::new();
    for (dialect, case) in common::cases() {
        failures.extend(run(dialect, case).await.err());
    }
    common::report(failures).unwrap_or_else(|report| panic!("{report}"));
}

#[tokio::test]
async fn a_stall_ends_by_the_stall_limit() {
    let dialect = omni_tokio::Dialect::AnthropicMessages;
    run(dialect, common::stall(dialect)).await.unwrap_or_else(|report| panic!("{report}"));
}
