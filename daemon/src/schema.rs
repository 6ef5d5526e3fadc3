//! The `COMPUTER` tool definition: a JSON Schema generated from the ipc call types, narrowed to
//! what this caller can use here and now, and a description that teaches it in few tokens. Each
//! command's args are rendered from the JSON Schema of the type its surface decodes them into.

use std::sync::Arc;

use computer_ipc::{ComputerCall, StepsCall, SurfaceName, TOOL_NAME};
use computer_surfaces::{CommandSpec, Registry, Risk, Surface};
use rmcp::model::{Tool, ToolAnnotations};
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

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
        // Commands with the same args, risk and result fields share a line:
        // `gui.cursor|move {} → x, y`.
        let mut lines: Vec<(Vec<&str>, String, Risk, String)> = Vec::new();
        for spec in &commands_of(surface.as_ref()) {
            // One line per command: a doc comment that spans lines is joined.
            let args = args_text(&(spec.args)().to_value()).replace('\n', " ");
            let fields = result_fields_of(surface.as_ref(), spec.name).join(", ");
            match lines.last_mut() {
                Some((names, last, risk, last_fields))
                    if *last == args && *risk == spec.risk && *last_fields == fields =>
                {
                    names.push(spec.name)
                }
                _ => lines.push((vec![spec.name], args, spec.risk, fields)),
            }
        }
        for (names, args, risk, fields) in lines {
            // Observing is the default; what acts or touches secrets says so.
            let risk = match risk {
                Risk::Observe => "",
                Risk::Act => " (act)",
                Risk::Secret => " (secret)",
            };
            let fields = if fields.is_empty() {
                String::new()
            } else {
                format!(" → {fields}")
            };
            text.push_str(&format!(
                "- {}.{} {{{args}}}{risk}{fields}\n",
                surface.name(),
                names.join("|")
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
         Result: JSON of the fields after → (`?`: only when it applies; flags that are false and \
         empty outputs are left out); on failure ok:false and error {code, message, path?, \
         valid?}, code no_match (nothing matches: what is there instead) | ambiguous (the \
         matches listed) | action_failed | denied | invalid_call | unavailable | ...; cut (when \
         output was cut to max_bytes: its full size and the artifact file holding all of it); \
         evidence (when asked). The receipt id is in structuredContent and _meta.\n\
         Or {steps:[...]}: several calls in one round, each decided and receipted on its own; \
         the reply is the last step's result.\n\
         A call awaiting approval sends progress; a host timeout that progress does not reset \
         (often 60 s) cuts the wait short.",
    );
    if listed.iter().any(|s| crate::jobs::offered_on(s.name())) {
        text.push('\n');
        text.push_str(crate::jobs::DESCRIPTION);
    }
    text
}

/// A surface's commands as the tool lists them: its own, and `job` where it honours `detach`
/// (the daemon serves that one, see `jobs.rs`).
/// The fields a command's reply may hold: the surface's own, or the daemon's for `job`.
fn result_fields_of(surface: &dyn Surface, command: &str) -> &'static [&'static str] {
    if command == crate::jobs::JOB_COMMAND && crate::jobs::offered_on(surface.name()) {
        crate::jobs::RESULT_FIELDS
    } else {
        surface.result_fields(command)
    }
}

fn commands_of(surface: &dyn Surface) -> Vec<CommandSpec> {
    let mut commands = surface.commands().to_vec();
    if crate::jobs::offered_on(surface.name()) {
        commands.push(crate::jobs::command_spec());
    }
    commands
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
    add_steps(&mut schema);

    let surfaces: Vec<Value> = listed.iter().map(|s| json!(s.name().as_str())).collect();
    let mut commands: Vec<&str> = listed
        .iter()
        .flat_map(|s| commands_of(s.as_ref()).into_iter().map(|c| c.name))
        .collect();
    commands.sort_unstable();
    commands.dedup();

    let properties = &mut schema["properties"];
    properties["surface"] = json!({"enum": surfaces});
    properties["command"] = json!({"enum": commands});
    properties["args"] = json!({"type": "object", "description": "per command, see description"});
    let can_screenshot = registry.evidence().is_some();
    if let Some(complications) = properties["complications"]["properties"].as_object_mut() {
        // Listed means callable: only what some listed surface honours.
        complications.retain(|name, _| {
            listed
                .iter()
                .any(|surface| surface.complications().contains(&name.as_str()))
        });
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

/// The multi-step form beside the single call: `steps` and its options join the properties, and
/// neither `surface` nor `steps` is required on its own (the description says one of them is;
/// several hosts refuse a top-level `oneOf`). A step's own shape is the single call's, said in
/// the item's description rather than repeated.
fn add_steps(schema: &mut Value) {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let mut steps = settings
        .into_generator()
        .into_root_schema_for::<StepsCall>()
        .to_value();
    strip(&mut steps);
    if let (Some(properties), Some(more)) = (
        schema["properties"].as_object_mut(),
        steps["properties"].as_object_mut(),
    ) {
        if let Some(list) = more.get_mut("steps") {
            list["items"] = json!({"type": "object"});
        }
        for (name, property) in std::mem::take(more) {
            properties.insert(name, property);
        }
    }
    if let Some(map) = schema.as_object_mut() {
        map.remove("required");
        map.insert(
            "description".into(),
            json!("One call: surface+command(+args, complications), or steps."),
        );
    }
}

/// A command's args in the fewest tokens that teach them, from their JSON Schema:
/// `name:type` per field, `?` when optional, strings and integers left unsaid, enums as `a|b`,
/// a field's doc after it and the type's doc at the end (`x, y; screen px`).
fn args_text(schema: &Value) -> String {
    let required: Vec<&str> = schema["required"]
        .as_array()
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut fields: Vec<String> = Vec::new();
    if let Some(properties) = schema["properties"].as_object() {
        for (name, field) in properties {
            let mut text = name.clone();
            if !required.contains(&name.as_str()) {
                text.push('?');
            }
            let kind = type_text(field);
            if !kind.is_empty() {
                text.push(':');
                text.push_str(&kind);
            }
            if let Some(doc) = field_doc(field) {
                // `max_dim?=1280`, `window?:id`, `text (any unicode)`, `argv?:[str] or script`
                match doc.chars().next() {
                    Some('=') => {}
                    Some('(') => text.push(' '),
                    _ if kind.is_empty() => text.push(':'),
                    _ => text.push(' '),
                }
                text.push_str(doc);
            }
            fields.push(text);
        }
    }
    let mut text = fields.join(", ");
    if let Some(doc) = schema["description"].as_str() {
        if !text.is_empty() {
            text.push_str("; ");
        }
        text.push_str(doc);
    }
    text
}

/// A field's own doc; an enum's values already say what its doc would, and an untagged enum's
/// doc is its type.
fn field_doc(field: &Value) -> Option<&str> {
    let doc = field["description"].as_str()?;
    ["enum", "oneOf", "anyOf"]
        .iter()
        .all(|key| field.get(*key).is_none())
        .then_some(doc)
}

/// A type in few tokens: `int`, `[int]`, `a|b`, `{x,y}`; plain strings and any value say
/// nothing. An untagged enum with a doc is its doc (`name|pid`).
fn type_text(schema: &Value) -> String {
    let variants = |key: &str| -> Option<Vec<&Value>> {
        schema[key].as_array().map(|options| {
            options
                .iter()
                .filter(|o| o.get("type") != Some(&json!("null")))
                .collect()
        })
    };
    if let Some(values) = schema["enum"].as_array() {
        let names: Vec<String> = values
            .iter()
            .filter_map(|v| v.as_str().map(str::to_string))
            .collect();
        return names.join("|");
    }
    if let Some(options) = variants("oneOf") {
        // Unit enum variants with docs come as `oneOf` of constants.
        let names: Vec<String> = options
            .iter()
            .filter_map(|o| {
                o["const"]
                    .as_str()
                    .map(str::to_string)
                    .or_else(|| o["enum"].as_array().map(|e| join_str(e)))
            })
            .collect();
        return names.join("|");
    }
    if let Some(options) = variants("anyOf") {
        if options.len() == 1 {
            let inner = type_text(options[0]);
            return match (inner.is_empty(), schema["description"].as_str()) {
                (true, Some(doc)) if !doc.starts_with('=') => doc.to_string(),
                _ => inner,
            };
        }
        if let Some(doc) = schema["description"].as_str() {
            return doc.to_string();
        }
        let kinds: Vec<String> = options
            .iter()
            .map(|o| type_text(o))
            .filter(|kind| !kind.is_empty())
            .collect();
        return kinds.join("|");
    }
    let kind = match &schema["type"] {
        Value::String(kind) => kind.as_str(),
        Value::Array(kinds) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|k| *k != "null")
            .unwrap_or(""),
        _ => "",
    };
    match kind {
        "number" => "num".into(),
        "boolean" => "bool".into(),
        "array" => {
            let item = type_text(&schema["items"]);
            let item = match (item.as_str(), &schema["items"]["type"]) {
                ("", kind) if kind == "integer" => "int",
                ("", _) => "str",
                (item, _) => item,
            };
            format!("[{item}]")
        }
        "object" => match schema["properties"].as_object() {
            Some(properties) => {
                let names: Vec<&str> = properties.keys().map(String::as_str).collect();
                format!("{{{}}}", names.join(","))
            }
            None => "{}".into(),
        },
        _ => String::new(),
    }
}

fn join_str(values: &[Value]) -> String {
    values
        .iter()
        .filter_map(Value::as_str)
        .collect::<Vec<_>>()
        .join("|")
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every command of every surface built here, with every field its args type has, is in the
    /// description: the text comes from the types `prepare` decodes.
    #[test]
    fn the_description_lists_every_command_with_its_args() {
        let registry = Registry::for_this_platform(&Default::default());
        let all: Vec<&Arc<dyn Surface>> = registry.all().iter().collect();
        assert!(all.len() >= 2, "shell and gui at least");
        let text = description(&registry, &all);
        for surface in &all {
            for spec in surface.commands() {
                let line = text
                    .lines()
                    .find(|line| {
                        line.strip_prefix(&format!("- {}.", surface.name()))
                            .and_then(|rest| rest.split(' ').next())
                            .is_some_and(|names| names.split('|').any(|n| n == spec.name))
                    })
                    .unwrap_or_else(|| {
                        panic!("no line for {}.{}:\n{text}", surface.name(), spec.name)
                    });
                let (args, results) = line.split_once(" → ").unwrap_or((line, ""));
                let schema = (spec.args)().to_value();
                for field in schema["properties"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, _)| k)
                {
                    assert!(args.contains(field.as_str()), "{field} missing from {line}");
                }
                assert_eq!(args.ends_with(" (act)"), spec.risk == Risk::Act, "{line}");
                let listed: Vec<&str> = results.split(", ").filter(|f| !f.is_empty()).collect();
                assert_eq!(
                    listed,
                    surface.result_fields(spec.name),
                    "result fields of {}.{}",
                    surface.name(),
                    spec.name
                );
            }
        }
    }

    /// Each command's line carries its own args' words, never another command's: `shell.send`
    /// says it types a stored secret, and `shell.read`'s wait bound is on `read`'s line.
    #[test]
    fn a_command_line_carries_its_own_docs() {
        let registry = Registry::for_this_platform(&Default::default());
        let all: Vec<&Arc<dyn Surface>> = registry.all().iter().collect();
        let text = description(&registry, &all);
        let line = |prefix: &str| {
            text.lines()
                .find(|line| line.starts_with(prefix))
                .unwrap_or_else(|| panic!("no {prefix} line in:\n{text}"))
                .to_string()
        };
        let send = line("- shell.send ");
        assert!(send.contains("{secret:"), "{send}");
        assert!(!send.contains("timeout_ms"), "{send}");
        assert!(line("- shell.read ").contains("timeout_ms"), "{text}");
    }

    #[test]
    fn args_render_in_few_tokens() {
        let schema = json!({
            "type": "object",
            "description": "screen px",
            "required": ["x"],
            "properties": {
                "x": {"type": "integer"},
                "n": {"type": ["integer", "null"], "description": "=1"},
                "mode": {"anyOf": [{"type": "string", "enum": ["a", "b"]}, {"type": "null"}]},
                "app": {"anyOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"type": "null"}], "description": "name|pid"},
                "argv": {"type": ["array", "null"], "items": {"type": "string"}, "description": "or script"},
                "text": {"type": "string", "description": "(any unicode)"},
                "area": {"type": "object", "properties": {"w": {}, "h": {}}},
            }
        });
        assert_eq!(
            args_text(&schema),
            "app?:name|pid, area?:{h,w}, argv?:[str] or script, mode?:a|b, n?=1, text? (any unicode), x; screen px"
        );
    }
}
