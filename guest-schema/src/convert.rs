//! The conversions from this crate's native types to the WIT types that
//! `wit_bindgen::generate!` writes into each component crate. A macro, because those
//! types exist only in the crate that generates them: the reference component and any
//! adapter built on this crate (`wit/template/`) expand the same code.

/// Defines `rejection`, `accepted`, `output`, `lowered` and `provider` in the calling
/// module, converting between this crate's types and the WIT types of the interface
/// module named by `$wit` (usually `exports::edgar::schema::adapter`).
#[macro_export]
macro_rules! wit_conversions {
    ($wit:path) => {
        use $wit as wit_types;

        fn rejection(r: $crate::Rejection) -> wit_types::Rejection {
            let kind = match r.kind {
                $crate::RejectionKind::InvalidJson => wit_types::RejectionKind::InvalidJson,
                $crate::RejectionKind::InvalidName => wit_types::RejectionKind::InvalidName,
                $crate::RejectionKind::NotObjectSchema => wit_types::RejectionKind::NotObjectSchema,
                $crate::RejectionKind::TooLarge => wit_types::RejectionKind::TooLarge,
                $crate::RejectionKind::Other => wit_types::RejectionKind::Other,
            };
            wit_types::Rejection {
                kind,
                message: r.message,
            }
        }

        fn dropped(d: $crate::Dropped) -> wit_types::Dropped {
            wit_types::Dropped {
                path: d.path,
                reason: d.reason,
            }
        }

        fn accepted(t: $crate::AcceptedTool) -> wit_types::AcceptedTool {
            wit_types::AcceptedTool {
                name: t.name,
                description: t.description,
                input_schema: t.input_schema,
                output_schema: t.output_schema,
                hints: wit_types::Hints {
                    title: t.hints.title,
                    read_only: t.hints.read_only,
                    destructive: t.hints.destructive,
                    idempotent: t.hints.idempotent,
                    open_world: t.hints.open_world,
                },
                dropped: t.dropped.into_iter().map(dropped).collect(),
            }
        }

        fn media(m: $crate::Media) -> wit_types::Media {
            wit_types::Media {
                mime_type: m.mime_type,
                data: m.data,
            }
        }

        fn block(b: $crate::ContentBlock) -> wit_types::ContentBlock {
            match b {
                $crate::ContentBlock::Text(t) => wit_types::ContentBlock::Text(t),
                $crate::ContentBlock::Image(m) => wit_types::ContentBlock::Image(media(m)),
                $crate::ContentBlock::Audio(m) => wit_types::ContentBlock::Audio(media(m)),
                $crate::ContentBlock::ResourceLink(l) => {
                    wit_types::ContentBlock::ResourceLink(wit_types::ResourceLink {
                        uri: l.uri,
                        name: l.name,
                        description: l.description,
                        mime_type: l.mime_type,
                    })
                }
                $crate::ContentBlock::Resource(r) => {
                    wit_types::ContentBlock::Embedded(wit_types::EmbeddedResource {
                        uri: r.uri,
                        mime_type: r.mime_type,
                        contents: match r.contents {
                            $crate::ResourceContents::Text(t) => {
                                wit_types::ResourceContents::Text(t)
                            }
                            $crate::ResourceContents::Blob(b) => {
                                wit_types::ResourceContents::Blob(b)
                            }
                        },
                    })
                }
            }
        }

        fn output(out: $crate::ToolOutput) -> wit_types::ToolOutput {
            wit_types::ToolOutput {
                is_error: out.is_error,
                blocks: out.blocks.into_iter().map(block).collect(),
            }
        }

        fn lowered(l: $crate::LoweredSchema) -> wit_types::LoweredSchema {
            wit_types::LoweredSchema {
                input_schema: l.input_schema,
                losses: l.losses.into_iter().map(dropped).collect(),
            }
        }

        fn provider(p: wit_types::Provider) -> $crate::Provider {
            match p {
                wit_types::Provider::Generic => $crate::Provider::Generic,
                wit_types::Provider::Anthropic => $crate::Provider::Anthropic,
                wit_types::Provider::OpenaiStrict => $crate::Provider::OpenAiStrict,
                wit_types::Provider::Gemini => $crate::Provider::Gemini,
            }
        }
    };
}

/// Defines `finding` in the calling module, converting this crate's findings to the WIT
/// type of the `scan` interface module named by `$scan` (usually
/// `exports::edgar::schema::scan`).
#[macro_export]
macro_rules! scan_conversions {
    ($scan:path) => {
        use $scan as scan_types;

        fn finding(f: $crate::Finding) -> scan_types::Finding {
            scan_types::Finding {
                kind: match f.kind {
                    $crate::FindingKind::InvisibleText => scan_types::FindingKind::InvisibleText,
                    $crate::FindingKind::DeceptiveName => scan_types::FindingKind::DeceptiveName,
                    $crate::FindingKind::Instructions => scan_types::FindingKind::Instructions,
                    $crate::FindingKind::Shadowing => scan_types::FindingKind::Shadowing,
                    $crate::FindingKind::Exfiltration => scan_types::FindingKind::Exfiltration,
                    $crate::FindingKind::Secret => scan_types::FindingKind::Secret,
                },
                severity: match f.severity {
                    $crate::Severity::Low => scan_types::Severity::Low,
                    $crate::Severity::Medium => scan_types::Severity::Medium,
                    $crate::Severity::High => scan_types::Severity::High,
                },
                rule: f.rule,
                path: f.path,
                start: f.start,
                end: f.end,
                message: f.message,
            }
        }
    };
}

/// Defines `prompt` and `resource` in the calling module, converting this crate's
/// accepted prompts and resources to the WIT types of the `context` interface module
/// named by `$context` (usually `exports::edgar::schema::context`).
#[macro_export]
macro_rules! context_conversions {
    ($context:path) => {
        use $context as context_types;

        fn prompt(p: $crate::AcceptedPrompt) -> context_types::AcceptedPrompt {
            context_types::AcceptedPrompt {
                name: p.name,
                title: p.title,
                description: p.description,
                arguments: p
                    .arguments
                    .into_iter()
                    .map(|a| context_types::PromptArgument {
                        name: a.name,
                        description: a.description,
                        required: a.required,
                    })
                    .collect(),
            }
        }

        fn resource(r: $crate::AcceptedResource) -> context_types::AcceptedResource {
            context_types::AcceptedResource {
                uri: r.uri,
                name: r.name,
                title: r.title,
                description: r.description,
                mime_type: r.mime_type,
                size: r.size,
            }
        }
    };
}
