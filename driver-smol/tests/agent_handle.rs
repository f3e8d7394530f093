//! The agent handle's own behaviour on smol (the checks are omni_conformance::async_agent's,
//! shared with omni-tokio): a chat turn and typed refusals, dropping the last handle stopping
//! the agent's work, subscribers from the start, a lagging subscriber dropped and told.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::time::Duration;

use omni_conformance::async_agent::{self, chat_replies, drop_replies, lagging_replies};
use omni_conformance::replay::ReplayServer;
use omni_conformance::sim::Reply;
use omni_smol::Client;

fn serve(replies: Vec<Reply>) -> (ReplayServer, Client) {
    let server = ReplayServer::start(replies).expect("replay server");
    let client = Client::builder()
        .base_url("anthropic", format!("{}/v1", server.base_url()))
        .api_key("anthropic", "sk-replay")
        .build()
        .expect("client");
    (server, client)
}

async fn sleep_for(limit: Duration) {
    smol::Timer::after(limit).await;
}

#[test]
fn a_chat_turn_through_the_handle() {
    let (_server, client) = serve(chat_replies());
    smol::block_on(async_agent::chat_turn(client));
}

// The agents run on smol's global executor: the blocking disconnect check does not hold them up.
#[test]
fn dropping_the_last_handle_stops_the_request_and_the_tools() {
    let (server, client) = serve(drop_replies());
    smol::block_on(async_agent::dropping_the_last_handle(client, &server, sleep_for));
}

#[test]
fn subscribers_given_to_the_builder_see_every_event() {
    let (_server, client) = serve(chat_replies());
    smol::block_on(async_agent::subscribers_from_the_start(client));
}

#[test]
fn a_weak_handle_does_not_keep_the_agent_running() {
    let (_server, client) = serve(chat_replies());
    smol::block_on(async_agent::weak_handles(client));
}

#[test]
fn a_subscriber_that_falls_behind_is_dropped_and_told() {
    let (_server, client) = serve(lagging_replies());
    smol::block_on(async_agent::lagging_subscriber(client));
}

#[test]
fn init_adds_a_registered_tool_with_its_handler() {
    let (_server, client) = serve(async_agent::init_tool_replies());
    assert!(smol::block_on(async_agent::init_adds_a_tool_with_its_handler(client)), "the handler ran");
}

/// What each of an agent's requests carried, against the mock provider:
/// omni_conformance::agent_requests (shared with omni-tokio; omni-blocking runs the same turns).
#[test]
fn an_agents_requests_carry_its_prompts_steps_and_state() {
    let mock = omni_conformance::agent_requests::mock();
    let provider = omni_conformance::agent_requests::hooked_provider(&mock);
    let client = Client::builder().provider(provider).build().expect("client");
    smol::block_on(omni_conformance::agent_requests::run(client, &mock));
}
