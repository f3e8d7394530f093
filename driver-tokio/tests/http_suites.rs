//! The HTTP suites every driver runs (omni_conformance::keepalive, connect_proxy and
//! faults): connections kept alive and stale ones costing no retry; calls through a
//! CONNECT proxy with credentials; whatever bytes a server sends, a call ends with a typed
//! outcome, keeping what came.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

mod common;

use common::Driver;
use omni_conformance::connect_proxy::proxy_suite;
use omni_conformance::divergences;
use omni_conformance::faults::fault_suite;
use omni_conformance::keepalive::reuse_suite;
use omni_conformance::logs::secret_headers_are_sent_but_never_printed;
use omni_conformance::redirects::redirect_suite;

#[test]
fn connections_are_reused_and_stale_ones_cost_no_retry() {
    reuse_suite(&Driver::new());
}

#[test]
fn calls_go_through_a_connect_proxy() {
    proxy_suite(&Driver::new());
}

#[test]
fn every_fault_ends_in_a_typed_outcome() {
    fault_suite(Driver::new());
}

#[test]
fn redirects_are_decided_by_the_core_and_credentials_never_leave_their_origin() {
    redirect_suite(&Driver::new());
}

#[test]
fn secret_headers_from_provider_and_options_are_sent_but_never_printed() {
    secret_headers_are_sent_but_never_printed(&Driver::new());
}

// Decisions once made differently per driver (issue 11), now made once in the core.

#[test]
fn two_tools_of_one_name_are_refused_before_anything_is_sent() {
    divergences::two_tools_of_one_name_are_refused_before_anything_is_sent(&Driver::new());
}

#[test]
fn each_call_draws_its_own_jitter_seed_unless_the_client_set_one() {
    divergences::each_call_draws_its_own_jitter_seed_unless_the_client_set_one(&Driver::new());
}

#[test]
fn each_agent_draws_its_own_jitter_seed_unless_the_client_set_one() {
    divergences::each_agent_draws_its_own_jitter_seed_unless_the_client_set_one(&Driver::new());
}

#[test]
fn a_call_refused_before_it_starts_names_the_model() {
    divergences::a_call_refused_before_it_starts_names_the_model(&Driver::new());
}
