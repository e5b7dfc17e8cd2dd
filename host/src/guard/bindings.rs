//! Host bindings generated from `wit/schema.wit`, and the one place that tells the
//! contract versions apart: a component exporting `adapter@0.2.x` is called through the
//! generated bindings, one exporting `adapter@0.1.x` (before `lower-schema`) through its
//! three functions, each type-checked against the same records. The optional `scan`
//! interface (0.2.1) and the optional `context` interface (0.2.2) have bindings of their
//! own, loaded from the same instance when the component exports them.

use wasmtime::component::{Component, ComponentExportIndex, Func, InstancePre};

use contextual::ContextualIndices;
use scanner::ScannerIndices;
use wasmtime::{AsContextMut, Store};

use super::sandbox::HostState;

wasmtime::component::bindgen!({
    path: "../wit",
    world: "schema-adapter",
});

/// The optional `scan` interface, in a world of its own so a component without it still
/// loads through the adapter's bindings.
mod scanner {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "scanner",
    });
}

/// The optional `context` interface (prompts and resources), likewise in a world of its
/// own.
mod contextual {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "contextual",
    });
}

/// The `context` interface's generated types.
pub use contextual::exports::edgar::schema::context as context_wit;
/// The exported interface's generated types and call wrappers.
pub use exports::edgar::schema::adapter as wit;
/// The `scan` interface's generated types.
pub use scanner::exports::edgar::schema::scan as scan_wit;

/// The interface a current component exports (semver-compatible minor versions match).
pub const ADAPTER_EXPORT: &str = "edgar:schema/adapter@0.2.2";
/// The optional findings interface (0.2.1 and later).
pub const SCAN_EXPORT: &str = "edgar:schema/scan@0.2.2";
/// The optional prompts-and-resources interface (0.2.2 and later).
pub const CONTEXT_EXPORT: &str = "edgar:schema/context@0.2.2";
/// The contract before `lower-schema`: still loaded, given the generic profile.
pub const PREVIOUS_EXPORT: &str = "edgar:schema/adapter@0.1.0";

/// The previous contract's functions, in this order.
const PREVIOUS_FUNCS: [&str; 3] = ["tool-name", "to-schema", "to-result"];

type NameCall<'a> = (&'a str, &'a str);
type NameResult = (Result<String, wit::Rejection>,);
type SchemaResult = (Result<wit::AcceptedTool, wit::Rejection>,);
type ResultCall<'a> = (&'a str,);
type OutputResult = (Result<wit::ToolOutput, wit::Rejection>,);

/// A type-checked adapter component ready to instantiate, of either contract version.
pub(super) enum AdapterPre {
    Current {
        pre: InstancePre<HostState>,
        adapter: SchemaAdapterIndices,
        /// The `scan` export's indices, when the component has one.
        scan: Option<ScannerIndices>,
        /// The `context` export's indices, when the component has one.
        context: Option<ContextualIndices>,
    },
    Previous {
        pre: InstancePre<HostState>,
        funcs: [ComponentExportIndex; 3],
    },
}

/// One instance of an adapter.
pub(super) enum Instance {
    Current(
        SchemaAdapter,
        Option<scanner::Scanner>,
        Option<contextual::Contextual>,
    ),
    Previous([Func; 3]),
}

/// Which contract `component` implements, if either: the current interface's index, or
/// the previous one's functions.
pub(super) enum Version {
    Current,
    Previous([ComponentExportIndex; 3]),
}

pub(super) fn version(component: &Component) -> Option<Version> {
    if component.get_export_index(None, ADAPTER_EXPORT).is_some() {
        return Some(Version::Current);
    }
    let interface = component.get_export_index(None, PREVIOUS_EXPORT)?;
    let [a, b, c] = PREVIOUS_FUNCS.map(|f| component.get_export_index(Some(&interface), f));
    Some(Version::Previous([a?, b?, c?]))
}

impl AdapterPre {
    /// A current adapter, with its `scan` and `context` exports when `component` has
    /// them (an export of the wrong shape is an error, not an absence).
    pub(super) fn current(
        component: &Component,
        pre: InstancePre<HostState>,
    ) -> wasmtime::Result<AdapterPre> {
        let scan = match component.get_export_index(None, SCAN_EXPORT) {
            Some(_) => Some(ScannerIndices::new(&pre)?),
            None => None,
        };
        let context = match component.get_export_index(None, CONTEXT_EXPORT) {
            Some(_) => Some(ContextualIndices::new(&pre)?),
            None => None,
        };
        Ok(AdapterPre::Current {
            adapter: SchemaAdapterIndices::new(&pre)?,
            pre,
            scan,
            context,
        })
    }

    pub(super) fn engine(&self) -> &wasmtime::Engine {
        match self {
            AdapterPre::Current { pre, .. } => pre.engine(),
            AdapterPre::Previous { pre, .. } => pre.engine(),
        }
    }

    /// Whether the adapter implements `lower-schema`.
    pub(super) fn lowers(&self) -> bool {
        matches!(self, AdapterPre::Current { .. })
    }

    /// Whether the adapter implements `scan`.
    pub(super) fn scans(&self) -> bool {
        matches!(self, AdapterPre::Current { scan: Some(_), .. })
    }

    /// Whether the adapter implements `context`.
    pub(super) fn contextual(&self) -> bool {
        matches!(
            self,
            AdapterPre::Current {
                context: Some(_),
                ..
            }
        )
    }

    pub(super) fn instantiate(&self, store: &mut Store<HostState>) -> wasmtime::Result<Instance> {
        match self {
            AdapterPre::Current {
                pre,
                adapter,
                scan,
                context,
            } => {
                let instance = pre.instantiate(&mut *store)?;
                let adapter = adapter.load(&mut *store, &instance)?;
                let scanner = match scan {
                    Some(indices) => Some(indices.load(&mut *store, &instance)?),
                    None => None,
                };
                let context = match context {
                    Some(indices) => Some(indices.load(&mut *store, &instance)?),
                    None => None,
                };
                Ok(Instance::Current(adapter, scanner, context))
            }
            AdapterPre::Previous { pre, funcs } => {
                let instance = pre.instantiate(&mut *store)?;
                let mut found = Vec::with_capacity(3);
                for (index, name) in funcs.iter().zip(PREVIOUS_FUNCS) {
                    found.push(
                        instance
                            .get_func(&mut *store, index)
                            .ok_or_else(|| wasmtime::format_err!("no function {name}"))?,
                    );
                }
                let funcs: [Func; 3] = found
                    .try_into()
                    .map_err(|_| wasmtime::format_err!("three functions expected"))?;
                Ok(Instance::Previous(funcs))
            }
        }
    }
}

impl Instance {
    /// Type-checks a previous-contract instance's functions against the records (each
    /// call checks its own again, as it takes a typed handle); done once at load so an
    /// incompatible component is refused there.
    pub(super) fn check_types(&self, store: &Store<HostState>) -> wasmtime::Result<()> {
        if let Instance::Previous([name, schema, result]) = self {
            name.typed::<NameCall<'_>, NameResult>(store)?;
            schema.typed::<NameCall<'_>, SchemaResult>(store)?;
            result.typed::<ResultCall<'_>, OutputResult>(store)?;
        }
        Ok(())
    }

    pub(super) fn tool_name(
        &self,
        store: &mut Store<HostState>,
        server: &str,
        tool: &str,
    ) -> wasmtime::Result<Result<String, wit::Rejection>> {
        match self {
            Instance::Current(a, ..) => {
                a.edgar_schema_adapter().call_tool_name(store, server, tool)
            }
            Instance::Previous([f, ..]) => {
                let typed = f.typed::<NameCall<'_>, NameResult>(&*store)?;
                Ok(typed.call(store.as_context_mut(), (server, tool))?.0)
            }
        }
    }

    pub(super) fn to_schema(
        &self,
        store: &mut Store<HostState>,
        server: &str,
        tool_json: &str,
    ) -> wasmtime::Result<Result<wit::AcceptedTool, wit::Rejection>> {
        match self {
            Instance::Current(a, ..) => a
                .edgar_schema_adapter()
                .call_to_schema(store, server, tool_json),
            Instance::Previous([_, f, _]) => {
                let typed = f.typed::<NameCall<'_>, SchemaResult>(&*store)?;
                Ok(typed.call(store.as_context_mut(), (server, tool_json))?.0)
            }
        }
    }

    pub(super) fn to_result(
        &self,
        store: &mut Store<HostState>,
        result_json: &str,
    ) -> wasmtime::Result<Result<wit::ToolOutput, wit::Rejection>> {
        match self {
            Instance::Current(a, ..) => a.edgar_schema_adapter().call_to_result(store, result_json),
            Instance::Previous([.., f]) => {
                let typed = f.typed::<ResultCall<'_>, OutputResult>(&*store)?;
                Ok(typed.call(store.as_context_mut(), (result_json,))?.0)
            }
        }
    }

    /// `lower-schema`; an adapter of the previous contract has none (callers ask
    /// [`AdapterPre::lowers`] first).
    pub(super) fn lower_schema(
        &self,
        store: &mut Store<HostState>,
        provider: wit::Provider,
        schema: &str,
    ) -> wasmtime::Result<Result<wit::LoweredSchema, wit::Rejection>> {
        match self {
            Instance::Current(a, ..) => a
                .edgar_schema_adapter()
                .call_lower_schema(store, provider, schema),
            Instance::Previous(_) => Err(wasmtime::format_err!(
                "the adapter implements {PREVIOUS_EXPORT}, which has no lower-schema"
            )),
        }
    }

    /// `scan-tool`; `None` when the adapter has no `scan` (callers ask
    /// [`AdapterPre::scans`] first).
    pub(super) fn scan_tool(
        &self,
        store: &mut Store<HostState>,
        server: &str,
        tool_json: &str,
    ) -> wasmtime::Result<Option<Vec<scan_wit::Finding>>> {
        match self {
            Instance::Current(_, Some(s), _) => s
                .edgar_schema_scan()
                .call_scan_tool(store, server, tool_json)
                .map(Some),
            _ => Ok(None),
        }
    }

    /// `scan-text`; `None` when the adapter has no `scan`.
    pub(super) fn scan_text(
        &self,
        store: &mut Store<HostState>,
        text: &str,
    ) -> wasmtime::Result<Option<Vec<scan_wit::Finding>>> {
        match self {
            Instance::Current(_, Some(s), _) => {
                s.edgar_schema_scan().call_scan_text(store, text).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// One of `context`'s three functions, by `kind`; `None` when the adapter has no
    /// `context` (callers ask [`AdapterPre::contextual`] first).
    pub(super) fn context(
        &self,
        store: &mut Store<HostState>,
        kind: ContextKind,
        server: &str,
        json: &str,
    ) -> wasmtime::Result<Option<Result<ContextItem, String>>> {
        let Instance::Current(_, _, Some(c)) = self else {
            return Ok(None);
        };
        let c = c.edgar_schema_context();
        Ok(Some(match kind {
            ContextKind::Prompt => c
                .call_to_prompt(store, server, json)?
                .map(ContextItem::Prompt),
            ContextKind::Resource => c
                .call_to_resource(store, server, json)?
                .map(ContextItem::Resource),
            ContextKind::Template => c
                .call_to_resource_template(store, server, json)?
                .map(ContextItem::Resource),
        }))
    }
}

/// Which of `context`'s functions to call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextKind {
    Prompt,
    Resource,
    Template,
}

/// What `context` accepted.
pub(super) enum ContextItem {
    Prompt(context_wit::AcceptedPrompt),
    Resource(context_wit::AcceptedResource),
}
