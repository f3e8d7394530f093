//! The agent handle's own behaviour on tokio (the checks are omni_conformance::async_agent's,
//! shared with omni-smol): a chat turn and typed refusals, dropping the last handle stopping
//! the agent's work, subscribers from the start, a lagging subscriber dropped and told.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use omni_conformance::async_agent::{self, chat_replies, drop_replies, lagging_replies};
use omni_conformance::replay::ReplayServer;
use omni_conformance::sim::Reply;
use omni_tokio::Client;

fn serve(replies: Vec<Reply>) -> (ReplayServer, Client) {
    let server = ReplayServer::start(replies).expect("replay server");
    let client = Client::builder()
        .base_url("anthropic", format!("{}/v1", server.base_url()))
        .api_key("anthropic", "sk-replay")
        .build()
        .expect("client");
    (server, client)
}

#[tokio::test]
async fn a_chat_turn_through_the_handle() {
    let (_server, client) = serve(chat_replies());
    async_agent::chat_turn(client).await;
}

// Multi-threaded: the disconnect check blocks its thread while the agent task runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_the_last_handle_stops_the_request_and_the_tools() {
    let (server, client) = serve(drop_replies());
    async_agent::dropping_the_last_handle(client, &server, tokio::time::sleep).await;
}

#[tokio::test]
async fn subscribers_given_to_the_builder_see_every_event() {
    let (_server, client) = serve(chat_replies());
    async_agent::subscribers_from_the_start(client).await;
}

#[tokio::test]
async fn a_weak_handle_does_not_keep_the_agent_running() {
    let (_server, client) = serve(chat_replies());
    async_agent::weak_handles(client).await;
}

#[tokio::test]
async fn a_subscriber_that_falls_behind_is_dropped_and_told() {
    let (_server, client) = serve(lagging_replies());
    async_agent::lagging_subscriber(client).await;
}

#[tokio::test]
async fn init_adds_a_registered_tool_with_its_handler() {
    let (_server, client) = serve(async_agent::init_tool_replies());
    assert!(async_agent::init_adds_a_tool_with_its_handler(client).await, "the handler ran");
}

/// What each of an agent's requests carried (per-prompt options, `max_steps` with a
/// prompt, `handle_step`'s system prompt, `set_state` of model, tools and options, an event
/// hook's change in the reply), against the mock provider: omni_conformance::agent_requests.
#[tokio::test]
async fn an_agents_requests_carry_its_prompts_steps_and_state() {
    let mock = omni_conformance::agent_requests::mock();
    let provider = omni_conformance::agent_requests::hooked_provider(&mock);
    let client = omni_tokio::Client::builder().provider(provider).build().expect("client");
    omni_conformance::agent_requests::run(client, &mock).await;
}
