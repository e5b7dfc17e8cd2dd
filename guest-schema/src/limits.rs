//! Every limit the reference adapter applies, each with the reason for its size.

/// Longest server or tool name accepted as input; real names are under 100 bytes.
pub const MAX_NAME_INPUT_BYTES: usize = 4096;
/// The longest model-visible name: OpenAI and others reject tool names over 64.
pub const MAX_NAME_LEN: usize = 64;
/// Hex digits of the hash suffix added to names that had to be changed or cut.
pub const NAME_HASH_HEX: usize = 10;
/// Largest tool object accepted by `to_schema`; the largest real one in the corpus is ~60 KB.
pub const MAX_TOOL_JSON_BYTES: usize = 1 << 20;
/// Largest accepted input schema after cleaning, as JSON text.
pub const MAX_SCHEMA_BYTES: usize = 256 << 10;
/// Deeper subschemas are replaced by `{}`: real schemas nest under ten levels.
pub const MAX_SCHEMA_DEPTH: usize = 32;
/// Enums longer than this are dropped (the value is then unconstrained) to keep prompts sane.
pub const MAX_ENUM_VALUES: usize = 1000;
/// Longest `pattern` kept; longer regexes are dropped rather than compiled.
pub const MAX_PATTERN_BYTES: usize = 1000;
/// A tool description is clamped to this many bytes (Claude Code uses 2 KiB).
pub const MAX_DESCRIPTION_BYTES: usize = 2048;
/// Descriptions and titles inside a schema are clamped to this many bytes.
pub const MAX_SCHEMA_TEXT_BYTES: usize = 1024;
/// A tool title is clamped to this many bytes.
pub const MAX_TITLE_BYTES: usize = 200;
/// Largest `CallToolResult` accepted by `to_result`, as JSON text.
pub const MAX_RESULT_JSON_BYTES: usize = 8 << 20;
/// Text blocks longer than this keep their head and tail around a marker (~25k tokens).
pub const MAX_TEXT_BYTES: usize = 100_000;
/// Largest decoded image, audio clip or blob kept in a result.
pub const MAX_MEDIA_BYTES: usize = 5 << 20;
/// Most content blocks in one result (the host refuses more than 1024); later blocks
/// become a note.
pub const MAX_BLOCKS: usize = 1000;
/// Total bytes of all blocks in one result; later blocks become a note.
pub const MAX_OUTPUT_BYTES: usize = 6 << 20;

/// Image types the harness can show a model.
pub const IMAGE_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];
/// Audio types the harness can pass on.
pub const AUDIO_TYPES: &[&str] = &[
    "audio/wav",
    "audio/x-wav",
    "audio/mpeg",
    "audio/mp3",
    "audio/ogg",
    "audio/webm",
    "audio/flac",
    "audio/aac",
    "audio/mp4",
];

/// Longest prompt or resource name (and title) accepted; longer ones are refused, as a
/// name is how the item is asked for again.
pub const MAX_CONTEXT_NAME_BYTES: usize = 256;
/// Most arguments of one prompt; a prompt with more is refused.
pub const MAX_PROMPT_ARGUMENTS: usize = 64;
/// Longest resource URI or URI template.
pub const MAX_URI_BYTES: usize = 2048;
/// Longest media type kept (RFC 6838 allows 127 bytes on each side; real ones are short).
pub const MAX_MIME_TYPE_BYTES: usize = 127;
/// Largest prompt or resource object accepted, as JSON text.
pub const MAX_CONTEXT_JSON_BYTES: usize = 256 << 10;
