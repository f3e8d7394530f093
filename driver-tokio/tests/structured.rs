//! Typed tools, validators and structured output through the tokio driver against the
//! replay server; the scenarios and their facts are in `omni_conformance::structured`.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::sync::Arc;

use omni_conformance::replay::ReplayServer;
use omni_conformance::scenarios;
use omni_conformance::structured::*;
use omni_tokio::{Client, Error, RetryPolicy, Tool};

fn client(server: &ReplayServer) -> Client {
    Client::builder()
        .base_url("anthropic", format!("{}/v1", server.base_url()))
        .api_key("anthropic", "sk-replay")
        .retry(RetryPolicy { seed: 7, ..RetryPolicy::default() })
        .build()
        .expect("client")
}

#[tokio::test]
async fn tool_cases() {
    for case in omni_conformance::structured::tool_cases() {
        let server = ReplayServer::start(case.replies.clone()).expect("replay server");
        let store = PopulationStore::new();
        let tool = if case.custom_validator {
            let validator = KnownCity::for_tool(store.clone()).expect("validator");
            let state = store.clone();
            Tool::with_validator(TOOL, store.description(), validator, move |query: CityQuery| {
                let state = state.clone();
                async move { state.lookup(query) }
            })
        } else {
            Tool::from_type_with_state(
                store.clone(),
                TOOL,
                store.description(),
                |store: Arc<PopulationStore>, query| async move { store.lookup(query) },
            )
        };
        let response = client(&server).call(scenarios::model(), TOOL_PROMPT).tool(tool).generate().await;
        let response = response.unwrap_or_else(|e| panic!("{}: {e}", case.name));
        check_tool_case(&case, &store, &server.requests(), &response);
    }
}

#[tokio::test]
async fn output_cases() {
    for case in omni_conformance::structured::output_cases() {
        let server = ReplayServer::start(case.replies.clone()).expect("replay server");
        let mut call = client(&server).call(scenarios::model(), OUTPUT_PROMPT);
        if case.custom_validator {
            call = call.output_validator(KnownCity::for_output(PopulationStore::new()).expect("validator"));
        }
        let outcome = match call.generate_object::<City>().await {
            Ok(city) => Ok(city),
            Err(Error::Output { error, response }) => Err(OutputFailure { error, response: *response }),
            Err(e) => panic!("{}: {e}", case.name),
        };
        check_output_case(&case, outcome, &server.requests());
    }
}

#[tokio::test]
async fn generate_object_on_the_client() {
    let case = &omni_conformance::structured::output_cases()[0];
    let server = ReplayServer::start(case.replies.clone()).expect("replay server");
    let city: City = client(&server).generate_object(scenarios::model(), OUTPUT_PROMPT).await.expect("a city");
    check_output_case(case, Ok(city), &server.requests());
}
