//! The `COMPUTER` tool definition: a JSON Schema generated from the ipc call types, narrowed to
//! what this caller can use here and now, and a description that teaches it in few tokens.

use std::sync::Arc;

use computer_ipc::{ComputerCall, SurfaceName, TOOL_NAME};
use computer_surfaces::{Registry, Risk, Surface};
use rmcp::model::{Tool, ToolAnnotations};
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

/// Complications not yet honoured by any surface: never listed. Listed means callable.
const UNSUPPORTED_COMPLICATIONS: &[&str] = &["secrets", "detach"];

/// The one tool, as `tools/list` returns it.
pub fn tool(registry: &Registry, scope: Option<&[SurfaceName]>) -> Tool {
    let listed: Vec<&Arc<dyn Surface>> = registry
        .ready()
        .filter(|s| scope.is_none_or(|scope| scope.contains(&s.name())))
        .collect();
    let mut text = description(registry, &listed);
    text.push_str(&unavailable_here(registry, scope));
    let mut tool = Tool::new(TOOL_NAME, text, input_schema(registry, &listed));
    tool.title = Some("Computer".into());
    tool.annotations = Some(
        ToolAnnotations::with_title("Computer")
            .read_only(false)
            .destructive(true)
            .idempotent(false)
            .open_world(true),
    );
    tool
}

fn description(registry: &Registry, listed: &[&Arc<dyn Surface>]) -> String {
    let mut text = String::from(
        "Act on this computer through structured surfaces; every call is receipted. \
         Call {surface, command, args, complications}.\nSurfaces:\n",
    );
    for surface in listed {
        for spec in surface.commands() {
            let risk = match spec.risk {
                Risk::Observe => "observe",
                Risk::Act => "act",
                Risk::Secret => "secret",
            };
            text.push_str(&format!(
                "- {}.{} args {{{}}} ({risk})\n",
                surface.name(),
                spec.name,
                spec.args
            ));
        }
    }
    if registry.evidence().is_some() {
        text.push_str(
            "evidence: none|screenshot (after the screen settles)|full (before+after); \
             screenshots are returned as file references; return.image=true inlines one.\n",
        );
    }
    text.push_str(
        "complications: cwd (absolute), env {NAME:value}, timeout_ms (default 30000), \
         return {max_bytes=4000, mode=head|tail|head_tail, select=[fields]}.\n\
         Result: JSON with ok, receipt and the fields; long output is cut to max_bytes and `cut` \
         gives the full size and an artifact path holding all of it.\n\
         A call awaiting a person's approval sends progress; a host timeout that progress does not \
         reset (often 60 s) cuts the wait short: answer sooner, raise it, or add a rule.",
    );
    text
}

/// Surfaces of this platform that cannot work here now (in the caller's scope), each with why and
/// the fix, so that a model can tell its person what to do rather than guess.
fn unavailable_here(registry: &Registry, scope: Option<&[SurfaceName]>) -> String {
    let mut text = String::new();
    for surface in registry.all() {
        if scope.is_some_and(|scope| !scope.contains(&surface.name())) {
            continue;
        }
        if let computer_surfaces::Availability::Unavailable { reason, fix } = surface.probe() {
            text.push_str(&format!(
                "\nUnavailable here: {}: {reason}; fix (for the person): {fix}",
                surface.name()
            ));
        }
    }
    text
}

fn input_schema(registry: &Registry, listed: &[&Arc<dyn Surface>]) -> Map<String, Value> {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let schema = settings
        .into_generator()
        .into_root_schema_for::<ComputerCall>();
    let mut schema = schema.to_value();
    strip(&mut schema);

    let surfaces: Vec<Value> = listed.iter().map(|s| json!(s.name().as_str())).collect();
    let mut commands: Vec<&str> = listed
        .iter()
        .flat_map(|s| s.commands().iter().map(|c| c.name))
        .collect();
    commands.sort_unstable();
    commands.dedup();

    let properties = &mut schema["properties"];
    properties["surface"] = json!({"enum": surfaces});
    properties["command"] = json!({"enum": commands});
    properties["args"] = json!({"type": "object", "description": "per command, see description"});
    let can_screenshot = registry.evidence().is_some();
    if let Some(complications) = properties["complications"]["properties"].as_object_mut() {
        for name in UNSUPPORTED_COMPLICATIONS {
            complications.remove(*name);
        }
        if !can_screenshot {
            complications.remove("evidence");
            if let Some(ret) = complications
                .get_mut("return")
                .and_then(|r| r["properties"].as_object_mut())
            {
                ret.remove("image");
            }
        }
    }
    match schema {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

/// Drops what costs tokens without teaching: titles, defaults of `null`, `format` of integers,
/// and the `["x", "null"]` spelling of optional fields (absence already says optional).
fn strip(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("title");
            map.remove("$schema");
            map.remove("format");
            map.remove("minimum");
            if map
                .get("default")
                .is_some_and(|d| d.is_null() || d == &json!({}) || d == &json!(false))
            {
                map.remove("default");
            }
            if let Some(Value::Array(types)) = map.get("type") {
                let concrete: Vec<Value> = types.iter().filter(|t| *t != "null").cloned().collect();
                if concrete.len() == 1 {
                    map.insert("type".into(), concrete[0].clone());
                }
            }
            if let Some(Value::Array(options)) = map.get("anyOf") {
                let concrete: Vec<Value> = options
                    .iter()
                    .filter(|o| o.get("type") != Some(&json!("null")))
                    .cloned()
                    .collect();
                if concrete.len() == 1 {
                    map.remove("anyOf");
                    if let Value::Object(inner) = &concrete[0] {
                        for (k, v) in inner {
                            map.entry(k.clone()).or_insert(v.clone());
                        }
                    }
                }
            }
            if let Some(Value::Array(options)) = map.get_mut("enum") {
                options.retain(|o| !o.is_null());
            }
            for child in map.values_mut() {
                strip(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip),
        _ => {}
    }
}

/// The tool definition as each ecosystem expects it.
pub fn render(tool: &Tool, format: &str) -> Value {
    match format {
        "openai" => json!({
            "type": "function",
            "function": {
                "name": tool.name,
                "description": tool.description,
                "parameters": *tool.input_schema,
            }
        }),
        "anthropic" => json!({
            "name": tool.name,
            "description": tool.description,
            "input_schema": *tool.input_schema,
        }),
        _ => json!({ "tools": [tool] }),
    }
}
