//! The omni clients: one call through each driver's public streaming API, every
//! `GenerateEvent` read, the case's deltas counted. The client is pointed at the loopback
//! server as the drivers' own scenario tests point it (`Wire::apply`: the provider's base
//! URL and a key), with `max_steps: 1` so that a tool call ends the call rather than
//! starting a second step (no tool is registered).

use omni_conformance::wires::Wire;
use omni_protocol::generate::GenerateEvent;
use omni_protocol::{Model, Options, StreamEvent};

use crate::case::{Case, Tally};
use omni_conformance::heap::allocations;

pub(crate) const PROMPT: &str = "Say hello.";

pub(crate) fn model(case: Case) -> Model {
    Wire(case.dialect()).model()
}

pub(crate) fn options() -> Options {
    Options { max_steps: Some(1), ..Options::default() }
}

/// Counts one event into `tally`; the end of the call is `Ok(true)`, a failed call an
/// error.
pub(crate) fn count(case: Case, tally: &mut Tally, event: &GenerateEvent) -> Result<bool, String> {
    match event {
        GenerateEvent::Stream { event: StreamEvent::TextDelta { delta, .. }, .. } if !case.is_tool() => {
            tally.delta(delta.len());
        }
        GenerateEvent::Stream { event: StreamEvent::ToolUseDelta { delta, .. }, .. } if case.is_tool() => {
            tally.delta(delta.len());
        }
        GenerateEvent::Finished(_) => return Ok(true),
        GenerateEvent::Failed { error, .. } => return Err(format!("the call failed: {error}")),
        _ => {}
    }
    Ok(false)
}

/// Starts the call (`start`) and reads its stream to the end: a tokio or smol stream (the
/// shell's `TextStream`, which both re-export). Allocations are counted from the start.
async fn read_async<E: std::fmt::Display>(
    case: Case,
    start: impl FnOnce() -> Result<omni_tokio::TextStream, E>,
) -> Result<Tally, String> {
    let before = allocations();
    let mut stream = start().map_err(err)?;
    let mut tally = Tally::default();
    let mut finished = false;
    while let Some(event) = stream.next().await {
        finished |= count(case, &mut tally, &event)?;
    }
    drop(stream);
    if !finished {
        return Err("the stream ended without `Finished`".into());
    }
    tally.allocations = allocations() - before;
    Ok(tally)
}

async fn tokio_call(case: Case, base_url: &str) -> Result<Tally, String> {
    let client = Wire(case.dialect()).apply(omni_tokio::Client::builder(), base_url).build().map_err(err)?;
    read_async(case, || client.call(model(case), PROMPT).options(options()).stream()).await
}

/// omni-tokio on a multi-thread runtime built as `#[tokio::main]` builds it.
pub fn tokio_multi_thread(case: Case, base_url: &str) -> Result<Tally, String> {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(err)?;
    runtime.block_on(tokio_call(case, base_url))
}

/// omni-tokio on a current-thread runtime (`#[tokio::main(flavor = "current_thread")]`).
pub fn tokio_current_thread(case: Case, base_url: &str) -> Result<Tally, String> {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(err)?;
    runtime.block_on(tokio_call(case, base_url))
}

/// omni-smol under `smol::block_on` (its tasks on smol's global executor).
pub fn smol(case: Case, base_url: &str) -> Result<Tally, String> {
    smol::block_on(async {
        let client = Wire(case.dialect()).apply(omni_smol::Client::builder(), base_url).build().map_err(err)?;
        read_async(case, || client.call(model(case), PROMPT).options(options()).stream()).await
    })
}

/// omni-blocking: the stream is an `Iterator` of events.
pub fn blocking(case: Case, base_url: &str) -> Result<Tally, String> {
    let client = Wire(case.dialect()).apply(omni_blocking::Client::builder(), base_url).build().map_err(err)?;
    let before = allocations();
    let stream = client.call(model(case), PROMPT).options(options()).stream().map_err(err)?;
    let mut tally = Tally::default();
    let mut finished = false;
    for event in stream {
        finished |= count(case, &mut tally, &event)?;
    }
    if !finished {
        return Err("the stream ended without `Finished`".into());
    }
    tally.allocations = allocations() - before;
    Ok(tally)
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}
