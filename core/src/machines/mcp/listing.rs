//! Tool listing: every page, bounded, one bad tool dropped with its reason, a change
//! announced during a listing answered by one more.

use std::time::Instant;

use serde_json::{Map, Value};

use super::io::{CallError, Era, McpEvent, McpTransport, McpWarning};
use super::tools::{self, SchemaBounds, ToolRejection};
use super::{modern, Kind, Listing, McpClient};

impl McpClient {
    pub(super) fn start_listing(&mut self, now: Instant) {
        match &mut self.listing {
            Some(listing) => listing.again = true,
            None => {
                self.listing = Some(Listing::default());
                self.request_page(None, now);
            }
        }
    }

    pub(super) fn request_page(&mut self, cursor: Option<String>, now: Instant) {
        let mut params = Map::new();
        if let Some(cursor) = cursor {
            params.insert("cursor".into(), cursor.into());
        }
        let timeout = self.config.request_timeout;
        self.request(Kind::ListPage, "tools/list", params, now, Some(timeout));
    }

    pub(super) fn on_page(&mut self, outcome: Result<Map<String, Value>, CallError>, now: Instant) {
        let Some(mut listing) = self.listing.take() else { return };
        let mut result = match outcome {
            Ok(result) => result,
            // A remembered modern era whose first request is refused: the server may have
            // changed eras.
            Err(error) if self.era() == Some(Era::Modern) && self.may_reprobe(&error) => {
                let modern_error =
                    matches!(&error, CallError::Rpc(e) if modern::judge_error(e) != modern::ProbeVerdict::Legacy);
                if !modern_error {
                    return self.reprobe(now);
                }
                self.events.push_back(McpEvent::Warning(McpWarning::ToolsRefreshFailed(error)));
                return;
            }
            Err(error) => {
                self.events.push_back(McpEvent::Warning(McpWarning::ToolsRefreshFailed(error)));
                if listing.again {
                    self.start_listing(now);
                }
                return;
            }
        };
        listing.pages += 1;
        let limits = self.config.limits;
        let bounds = SchemaBounds { depth: limits.max_schema_depth, bytes: limits.max_schema_bytes };
        let entries = match result.remove("tools") {
            Some(Value::Array(entries)) => entries,
            _ => Vec::new(),
        };
        for entry in entries {
            if listing.tools.len() >= limits.max_tools {
                listing.dropped += 1;
                listing.truncated = true;
                continue;
            }
            match tools::read_tool(entry, bounds) {
                Ok(tool) if listing.names.contains(&tool.name) => {
                    listing.dropped += 1;
                    let warning = McpWarning::ToolDropped { name: Some(tool.name), reason: ToolRejection::Duplicate };
                    self.events.push_back(McpEvent::Warning(warning));
                }
                Ok(tool) => {
                    // Over HTTP a client "MUST reject" a tool with an invalid `x-mcp-header`;
                    // over stdio the annotations mean nothing and are ignored.
                    if matches!(self.config.transport, McpTransport::Http { .. }) {
                        match modern::param_headers(&tool.input_schema) {
                            Ok(headers) if headers.is_empty() => {}
                            Ok(headers) => {
                                listing.param_headers.insert(tool.name.clone(), headers);
                            }
                            Err(why) => {
                                listing.dropped += 1;
                                let reason = ToolRejection::BadHeaderAnnotation(why);
                                let warning = McpWarning::ToolDropped { name: Some(tool.name), reason };
                                self.events.push_back(McpEvent::Warning(warning));
                                continue;
                            }
                        }
                    }
                    listing.names.insert(tool.name.clone());
                    listing.tools.push(tool);
                }
                Err((name, reason)) => {
                    listing.dropped += 1;
                    self.events.push_back(McpEvent::Warning(McpWarning::ToolDropped { name, reason }));
                }
            }
        }
        let next = result.get("nextCursor").and_then(Value::as_str).map(str::to_owned);
        match next {
            // A cursor seen before would list the same pages forever.
            Some(cursor)
                if !listing.truncated && listing.pages < limits.max_pages && listing.cursors.insert(cursor.clone()) =>
            {
                self.listing = Some(listing);
                self.request_page(Some(cursor), now);
            }
            next => {
                if listing.truncated || next.is_some() {
                    let warning = McpWarning::ToolsTruncated { kept: listing.tools.len() };
                    self.events.push_back(McpEvent::Warning(warning));
                }
                // Shared with the event, not copied (100,000 tools are tens of MB).
                self.tools = listing.tools.into();
                self.param_headers = listing.param_headers;
                self.events.push_back(McpEvent::Tools { tools: self.tools.clone(), dropped: listing.dropped });
                if listing.again {
                    self.start_listing(now);
                }
            }
        }
    }
}
