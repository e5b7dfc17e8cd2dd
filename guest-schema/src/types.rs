//! Native mirrors of the WIT records in `wit/schema.wit`.

/// The WIT `rejection-kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RejectionKind {
    InvalidJson,
    InvalidName,
    NotObjectSchema,
    TooLarge,
    Other,
}

/// The WIT `rejection`: the input is refused outright.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub kind: RejectionKind,
    pub message: String,
}

impl Rejection {
    pub(crate) fn new(kind: RejectionKind, message: impl Into<String>) -> Rejection {
        Rejection {
            kind,
            message: message.into(),
        }
    }
}

/// The WIT `hints`: untrusted tool annotations.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hints {
    pub title: Option<String>,
    pub read_only: Option<bool>,
    pub destructive: Option<bool>,
    pub idempotent: Option<bool>,
    pub open_world: Option<bool>,
}

/// The WIT `dropped`: one removal or change, with its reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dropped {
    pub path: String,
    pub reason: String,
}

/// The WIT `accepted-tool`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptedTool {
    pub name: String,
    pub description: String,
    pub input_schema: String,
    pub output_schema: Option<String>,
    pub hints: Hints,
    pub dropped: Vec<Dropped>,
}

/// The WIT `media`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Media {
    pub mime_type: String,
    pub data: String,
}

/// The WIT `resource-link`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceLink {
    pub uri: String,
    pub name: String,
    pub description: Option<String>,
    pub mime_type: Option<String>,
}

/// The WIT `resource-contents`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceContents {
    Text(String),
    Blob(String),
}

/// The WIT `embedded-resource`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EmbeddedResource {
    pub uri: String,
    pub mime_type: Option<String>,
    pub contents: ResourceContents,
}

/// The WIT `content-block`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ContentBlock {
    Text(String),
    Image(Media),
    Audio(Media),
    ResourceLink(ResourceLink),
    Resource(EmbeddedResource),
}

/// The WIT `tool-output`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    pub is_error: bool,
    pub blocks: Vec<ContentBlock>,
}

/// The WIT `severity` of a finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Low,
    Medium,
    High,
}

/// The WIT `finding-kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FindingKind {
    InvisibleText,
    DeceptiveName,
    Instructions,
    Shadowing,
    Exfiltration,
    Secret,
}

/// The WIT `finding`: what a rule found, and where (a byte range of the string at
/// `path`). The message never quotes a secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub kind: FindingKind,
    pub severity: Severity,
    pub rule: String,
    pub path: String,
    pub start: u32,
    pub end: u32,
    pub message: String,
}
