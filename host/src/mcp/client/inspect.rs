//! A one-off look at a server for a scanner (`edgar mcp scan --discover`): start it,
//! list its tools, run them through the guard and its scan, stop it. Nothing is cached,
//! pinned or offered to a model, and the server's state in the session is left alone.

use crate::guard::SanitizedTool;
use crate::guard::findings::Finding;
use crate::mcp::McpError;

use super::SessionInner;
use super::discovery::{list_tools, screen_tools};
use super::hints::with_tail;

/// A server's tools as the guard sees them.
#[derive(Debug, Default)]
pub struct Inspection {
    /// Each tool the guard accepted, with the findings on it.
    pub tools: Vec<(SanitizedTool, Vec<Finding>)>,
    /// The tools the guard refused, with why.
    pub refused: Vec<String>,
    /// Tools the adapter could not scan (the guard's other checks stood), with why.
    pub unscanned: Vec<String>,
    /// Whether the adapter reports findings at all (an adapter built for `edgar:schema`
    /// 0.2.0 does not).
    pub scans: bool,
}

impl SessionInner {
    /// Starts `name`, lists its tools through the guard and its scan, and stops it, all
    /// under the entry's startup timeout.
    pub async fn inspect(&self, name: &str) -> Result<Inspection, McpError> {
        let server = self.server(name)?;
        let spec = &server.spec;
        let (mut transport, conn) = self.connect(spec)?;
        let work = async {
            let (adapter, era) = tokio::join!(self.adapter(server), self.negotiate(spec, &conn));
            let (adapter, _) = (adapter?, era?);
            let (raw, _) = list_tools(name, &conn, spec.startup_timeout).await?;
            let (screened, refused) = screen_tools(&adapter, spec, raw).await?;
            let mut out = Inspection {
                refused,
                scans: adapter.scans(),
                ..Inspection::default()
            };
            for (tool, scan) in screened {
                let found = match scan {
                    Some(Ok(found)) => found,
                    Some(Err(e)) => {
                        out.unscanned.push(format!("{}: {e}", tool.tool()));
                        Vec::new()
                    }
                    None => Vec::new(),
                };
                out.tools.push((tool, found));
            }
            Ok::<_, McpError>(out)
        };
        let outcome = match tokio::time::timeout(spec.startup_timeout, work).await {
            Ok(r) => r,
            Err(_) => Err(McpError::Timeout {
                server: name.to_owned(),
                method: "initialize and tools/list".into(),
                timeout: spec.startup_timeout,
            }),
        };
        let tail = transport.stderr_tail();
        transport.close().await;
        outcome.map_err(|e| with_tail(e, &tail))
    }
}
