//! The message shapes of the legacy era, **2025-11-25** and the earlier revisions whose
//! tool messages it extends (`docs/specification/2025-11-25/basic/lifecycle.mdx`,
//! `basic/transports.mdx`, `basic/utilities/ping.mdx`, `schema/2025-11-25/schema.ts`):
//! an `initialize` request (`protocolVersion`, `capabilities`, `clientInfo`) answered by
//! the server's version, capabilities and `serverInfo`; then `notifications/initialized`;
//! over HTTP the `Mcp-Session-Id` the server may assign, sent back on every later request
//! (a 404 to a request carrying it: the session is gone, initialize again) and
//! `MCP-Protocol-Version` on every request after the handshake; `ping` both ways; list
//! changes as plain `notifications/tools/list_changed`.

use serde_json::{json, Value};

/// The legacy revision this client asks for.
pub(crate) const VERSION: &str = "2025-11-25";

/// The legacy revisions it accepts when a server answers with an older one: their
/// `tools/list` and `tools/call` are the same messages, fields added over time
/// (`structuredContent` since 2025-06-18, audio since 2025-03-26) simply absent.
pub(crate) const ACCEPTED: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

pub(crate) const INITIALIZE: &str = "initialize";
pub(crate) const INITIALIZED: &str = "notifications/initialized";
pub(crate) const PING: &str = "ping";

/// The session header (`transports.mdx`, "Session Management"; header names are
/// case-insensitive).
pub(crate) const HEADER_SESSION: &str = "Mcp-Session-Id";

pub(crate) fn initialize_params(client_name: &str, client_version: &str) -> Value {
    json!({
        "protocolVersion": VERSION,
        // No optional client capabilities: no roots, sampling or elicitation.
        "capabilities": {},
        "clientInfo": { "name": client_name, "version": client_version },
    })
}

/// A session id is visible ASCII (0x21 to 0x7E) by the spec; anything else is not one
/// the client will echo into a header.
pub(crate) fn valid_session_id(id: &str) -> bool {
    !id.is_empty() && id.bytes().all(|b| (0x21..=0x7e).contains(&b))
}
