//! The mock provider through omni-smol: every case of every dialect.

mod common;

use omni_smol::Client;

async fn run(dialect: omni_smol::Dialect, case: common::Case) -> Result<(), String> {
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

#[test]
fn every_case_of_every_dialect() {
    smol::block_on(async {
        let mut failures = Vec::new();
        for (dialect, case) in common::cases() {
            failures.extend(run(dialect, case).await.err());
        }
        common::report(failures).unwrap_or_else(|report| panic!("{report}"));
    });
}

#[test]
fn a_stall_ends_by_the_stall_limit() {
    let dialect = omni_smol::Dialect::GoogleGemini;
    smol::block_on(run(dialect, common::stall(dialect))).unwrap_or_else(|report| panic!("{report}"));
}
