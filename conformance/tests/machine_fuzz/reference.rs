//! The reference model of effects: every request and tool run the machine asked for and
//! what became of it, and the rules a request's conversation must follow.

use std::collections::BTreeMap;

use omni_protocol::generate::{Effect, RequestId, ToolRunId};
use omni_protocol::observe::Observation;

/// What the driver side knows of one request.
#[derive(Debug, Default)]
pub(crate) struct Request {
    /// The body the head announced (`None` until the head was sent).
    pub(crate) body: Option<Vec<u8>>,
    /// A valid stream (200) rather than an error body.
    pub(crate) stream: bool,
    /// Bytes of `body` sent.
    pub(crate) sent: usize,
    /// Body end or transport failure reported.
    pub(crate) answered: bool,
    /// The machine cancelled it.
    pub(crate) cancelled: bool,
    /// Garbage was sent: the stream is no longer valid.
    pub(crate) spoiled: bool,
}

impl Request {
    pub(crate) fn open(&self) -> bool {
        !self.answered && !self.cancelled
    }
    /// The machine has all it needs: an end, a failure, a cancel, or the whole of a valid stream.
    pub(crate) fn settled(&self) -> bool {
        !self.open() || (self.stream && !self.spoiled && self.body.as_ref().is_some_and(|b| self.sent == b.len()))
    }
}

#[derive(Debug, Default)]
pub(crate) struct Tool {
    pub(crate) answered: bool,
    pub(crate) cancelled: bool,
}

/// Every request and tool run the machine asked for, and what became of it.
#[derive(Debug, Default)]
pub(crate) struct Ledger {
    pub(crate) requests: BTreeMap<RequestId, Request>,
    pub(crate) tools: BTreeMap<ToolRunId, Tool>,
    pub(crate) telemetry: Telemetry,
}

/// What the machine told its telemetry so far (property 9: its observations nest).
#[derive(Debug, Default)]
pub(crate) struct Telemetry {
    /// An inference is open, and whether its first chunk was told.
    inference: Option<bool>,
    /// The last effect was `InferenceStarted`: the next one sends its request.
    sending: bool,
    turn: bool,
}

impl Telemetry {
    /// Property 9: an inference starts only when none is open, with its request next; a
    /// first chunk (once), a redirect or a retry come only inside one; turns open and
    /// close in turn, and an agent's inference happens inside its turn (`agent`).
    pub(crate) fn effect(&mut self, effect: &Effect, agent: bool) -> Result<(), String> {
        if std::mem::take(&mut self.sending) && !matches!(effect, Effect::SendRequest { .. }) {
            return Err(format!("an inference started, then {effect:?} instead of its request"));
        }
        let Effect::Observe(observation) = effect else { return Ok(()) };
        match observation {
            Observation::InferenceStarted(start) => {
                if self.inference.is_some() {
                    return Err("an inference started while one was open".into());
                }
                if agent && !self.turn {
                    return Err("an agent's inference started outside a turn".into());
                }
                if start.request_model.is_empty() || start.content.is_none() {
                    return Err(format!("an inference started without its model or content: {start:?}"));
                }
                self.inference = Some(false);
                self.sending = true;
            }
            Observation::FirstChunk => match self.inference {
                Some(false) => self.inference = Some(true),
                Some(true) => return Err("a second first chunk in one inference".into()),
                None => return Err("a first chunk outside an inference".into()),
            },
            Observation::Redirected { .. } | Observation::Retrying { .. } if self.inference.is_none() => {
                return Err(format!("{observation:?} outside an inference"));
            }
            Observation::InferenceEnded(end) => {
                if self.inference.take().is_none() {
                    return Err("an inference ended that was not open".into());
                }
                let stopped = !end.finish_reasons.is_empty();
                if stopped == end.error_type.is_some() {
                    return Err(format!(
                        "an inference ended with both or neither a finish reason and an error: {end:?}"
                    ));
                }
            }
            Observation::TurnStarted if self.turn => return Err("a turn started while one was open".into()),
            Observation::TurnStarted => self.turn = true,
            Observation::TurnEnded { .. } if !self.turn => return Err("a turn ended that was not open".into()),
            Observation::TurnEnded { .. } => {
                if self.inference.is_some() {
                    return Err("a turn ended with its inference open".into());
                }
                self.turn = false;
            }
            _ => {}
        }
        Ok(())
    }

    /// At rest: nothing is open (`paused`: the turn may be).
    pub(crate) fn settled(&self, paused: bool) -> Result<(), String> {
        if self.inference.is_some() || self.sending {
            return Err("an inference left open at rest".into());
        }
        if self.turn && !paused {
            return Err("a turn left open at rest".into());
        }
        Ok(())
    }
}

impl Ledger {
    pub(crate) fn effect(&mut self, effect: Effect) -> Result<(), String> {
        match effect {
            Effect::SendRequest { id, request } => {
                acceptable_history(&request.body).map_err(|e| format!("request {}: {e}", id.0))?;
                if self.requests.insert(id, Request::default()).is_some() {
                    return Err(format!("request id {} issued twice", id.0));
                }
            }
            Effect::CancelRequest { id } => {
                let request = self.requests.get_mut(&id).ok_or(format!("cancel of unknown request {}", id.0))?;
                if request.cancelled {
                    return Err(format!("request {} cancelled twice", id.0));
                }
                request.cancelled = true;
            }
            Effect::RunTool { id, .. } => {
                if self.tools.insert(id, Tool::default()).is_some() {
                    return Err(format!("tool run id {} issued twice", id.0));
                }
            }
            // Checked by `Telemetry::effect`.
            Effect::Observe(_) => {}
            Effect::CancelTool { id } => {
                let tool = self.tools.get_mut(&id).ok_or(format!("cancel of unknown tool run {}", id.0))?;
                if tool.cancelled || tool.answered {
                    return Err(format!("tool run {} cancelled after it was settled", id.0));
                }
                tool.cancelled = true;
            }
        }
        Ok(())
    }

    /// Nothing the machine asked for is left hanging (called when it is done or idle).
    pub(crate) fn all_settled(&self) -> Result<(), String> {
        if let Some((id, r)) = self.requests.iter().find(|(_, r)| !r.settled()) {
            return Err(format!("request {} left neither answered nor cancelled: {r:?}", id.0));
        }
        if let Some((id, _)) = self.tools.iter().find(|(_, t)| !t.answered && !t.cancelled) {
            return Err(format!("tool run {} left neither answered nor cancelled", id.0));
        }
        Ok(())
    }

    pub(crate) fn nth<K: Copy, V>(map: &BTreeMap<K, V>, pick: usize, keep: impl Fn(&V) -> bool) -> Option<K> {
        let open: Vec<K> = map.iter().filter(|(_, v)| keep(v)).map(|(k, _)| *k).collect();
        (!open.is_empty()).then(|| open[pick % open.len()])
    }
}

/// Property 8: a request's conversation is one a provider accepts: it ends with the
/// user's turn, every tool call is answered by a result in the next (user) message, and
/// every result answers a call of the message before.
pub(crate) fn acceptable_history(body: &[u8]) -> Result<(), String> {
    let body: serde_json::Value = serde_json::from_slice(body).map_err(|e| format!("body is not JSON: {e}"))?;
    let messages = body["messages"].as_array().ok_or("no messages")?;
    let blocks = |m: &serde_json::Value, kind: &str, key: &str| -> Vec<String> {
        m["content"]
            .as_array()
            .map(|c| c.iter().filter(|b| b["type"] == kind).filter_map(|b| b[key].as_str().map(String::from)).collect())
            .unwrap_or_default()
    };
    if messages.last().is_none_or(|m| m["role"] != "user") {
        return Err("the conversation does not end with the user's turn".into());
    }
    for (i, message) in messages.iter().enumerate() {
        let calls = blocks(message, "tool_use", "id");
        let results = blocks(message, "tool_result", "tool_use_id");
        if !calls.is_empty() {
            let answered =
                messages.get(i + 1).map(|next| blocks(next, "tool_result", "tool_use_id")).unwrap_or_default();
            if let Some(call) = calls.iter().find(|c| !answered.contains(c)) {
                return Err(format!("message {i}: tool call {call} has no result in the next message"));
            }
        }
        if !results.is_empty() {
            let asked = i.checked_sub(1).map(|p| blocks(&messages[p], "tool_use", "id")).unwrap_or_default();
            if let Some(result) = results.iter().find(|r| !asked.contains(r)) {
                return Err(format!("message {i}: tool result {result} answers no call of the message before"));
            }
        }
    }
    Ok(())
}
