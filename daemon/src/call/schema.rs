//! The `COMPUTER` tool definition: a JSON Schema generated from the ipc call types, narrowed to
//! what this caller can use here and now, and a description that teaches it in few tokens. Each
//! command's args are rendered from the JSON Schema of the type its surface decodes them into.

use std::sync::Arc;

use computer_ipc::{ComputerCall, SurfaceName, TOOL_NAME, ToolError};
use computer_surfaces::{CommandSpec, Registry, Risk, Surface};
use rmcp::model::{Tool, ToolAnnotations};
use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

/// The one tool, as `tools/list` returns it: a short description that lists every command with
/// the args it cannot do without, and `help` for the rest (progressive disclosure: the full
/// reference of a surface is one call away instead of in every prompt).
pub fn tool(registry: &Registry, scope: Option<&[SurfaceName]>) -> Tool {
    let listed: Vec<&Arc<dyn Surface>> = registry
        .ready()
        .filter(|s| scope.is_none_or(|scope| scope.contains(&s.name())))
        .collect();
    definition(registry, &listed, &unavailable_here(registry, scope))
}

/// The tool an observe-only connection gets (`computer mcp --observe-only`): the same
/// `COMPUTER` tool, its description and input schema listing only the commands that observe,
/// annotated read-only (hosts that gate on annotations run it without asking). The daemon
/// refuses whatever acts on such a connection; this only says so.
pub fn observe_only_tool(registry: &Registry, scope: Option<&[SurfaceName]>) -> Tool {
    let listed: Vec<&Arc<dyn Surface>> = registry
        .ready()
        .filter(|s| scope.is_none_or(|scope| scope.contains(&s.name())))
        .collect();
    let mut tool = definition_of(registry, &listed, &unavailable_here(registry, scope), true);
    tool.annotations = Some(
        ToolAnnotations::with_title("Computer (observe only)")
            .read_only(true)
            .destructive(false)
            .idempotent(true)
            .open_world(true),
    );
    tool
}

/// The tool listing `listed`, its description ending with `unavailable` (what cannot work here).
fn definition(registry: &Registry, listed: &[&Arc<dyn Surface>], unavailable: &str) -> Tool {
    definition_of(registry, listed, unavailable, false)
}

/// [`definition`], listing only the commands that observe when `observe_only`.
fn definition_of(
    registry: &Registry,
    listed: &[&Arc<dyn Surface>],
    unavailable: &str,
    observe_only: bool,
) -> Tool {
    let mut text = description(registry, listed, observe_only);
    text.push_str(unavailable);
    let mut tool = Tool::new(TOOL_NAME, text, input_schema_of(listed, observe_only));
    tool.title = Some("Computer".into());
    tool.output_schema = Some(Arc::new(output_schema()));
    tool.annotations = Some(
        ToolAnnotations::with_title("Computer")
            .read_only(false)
            .destructive(true)
            .idempotent(false)
            .open_world(true),
    );
    tool
}

pub(crate) fn description(
    registry: &Registry,
    listed: &[&Arc<dyn Surface>],
    observe_only: bool,
) -> String {
    let mut lines = String::new();
    let mut any_secret = false;
    for surface in listed {
        let mut seen = Vec::new();
        let commands: Vec<String> = commands_of(surface.as_ref())
            .iter()
            .filter(|spec| !observe_only || spec.risk == Risk::Observe)
            .map(|spec| {
                let risk = match spec.risk {
                    Risk::Observe => "",
                    Risk::Act => "!",
                    Risk::Secret => {
                        any_secret = true;
                        "!!"
                    }
                };
                let needed = needed_args(&(spec.args)().to_value(), &mut seen);
                format!("{}{needed}{risk}", spec.name)
            })
            .collect();
        lines.push_str(&format!("{}: {}\n", surface.name(), commands.join(" ")));
    }
    let mut text = format!(
        "Act on this computer; every call is receipted. Call {{surface, command, args, \
         complications}}. {{surface:S, command:\"help\"}} returns S's reference: every arg, \
         result field and complication (args {{command:C}}: C only); ask it before a command you \
         have not used. Commands, with the args they need (! acts{}):\n{lines}",
        if any_secret {
            ", !! touches a secret"
        } else {
            ""
        }
    );
    text.push_str(
        "Result: the command's fields, ok and receipt; failed: ok:false, error {code, message, \
         path?, valid?}. complications: timeout_ms, return {max_bytes=4000}",
    );
    if registry.evidence().is_some() {
        text.push_str(", evidence: screenshot|full");
    }
    text.push_str(
        ". Or {steps:[calls]}: several calls in one round, each receipted; \"$1.field\" in args \
         is step 1's result field.",
    );
    if observe_only {
        text.insert_str(
            0,
            "OBSERVE ONLY: this connection reads the computer and never acts; a call that acts \
             is refused. ",
        );
    }
    text
}

/// The args a command cannot do without, each with its type and a short doc (`combo:e.g.
/// Return|ctrl+shift+t`); fields whose docs offer each other as the alternative (`argv`: "or
/// script") as `argv:[str]|script`; nothing when every arg is optional.
/// A field already taught on the same surface's line (`seen`) is named only.
fn needed_args(schema: &Value, seen: &mut Vec<String>) -> String {
    const SHORT_DOC: usize = 48;
    let properties = schema["properties"].as_object();
    let mut field = |name: &str| -> String {
        let Some(field) = properties.and_then(|p| p.get(name)) else {
            return name.to_string();
        };
        let mut text = name.to_string();
        if seen.iter().any(|s| s == name) {
            return text;
        }
        seen.push(name.to_string());
        let kind = type_text(field);
        // An enum's values are worth more room than a doc: they are the valid words.
        if !kind.is_empty() && kind.len() <= 2 * SHORT_DOC {
            text.push(':');
            text.push_str(&kind);
        } else if let Some(doc) = field_doc(field).filter(|doc| doc.len() <= SHORT_DOC) {
            text.push(if doc.starts_with('(') { ' ' } else { ':' });
            text.push_str(doc);
        }
        text
    };
    let mut needed: Vec<String> = schema["required"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(&mut field)
        .collect();
    for (name, doc) in properties
        .into_iter()
        .flatten()
        .filter_map(|(name, f)| Some((name, f["description"].as_str()?)))
    {
        let other = doc
            .split(" or ")
            .nth(1)
            .or(doc.strip_prefix("or "))
            .and_then(|rest| {
                rest.split(|c: char| !c.is_alphanumeric() && c != '_')
                    .next()
            })
            .filter(|other| properties.is_some_and(|p| p.contains_key(*other)));
        if let Some(other) = other {
            let kind = properties
                .and_then(|p| p.get(name))
                .map(type_text)
                .filter(|kind| !kind.is_empty() && !kind.contains(" or "))
                .map(|kind| format!(":{kind}"))
                .unwrap_or_default();
            needed.push(format!("{name}{kind}|{other}"));
        }
    }
    if needed.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", needed.join(", "))
    }
}

/// A surface's full reference, for `help`: one line per command (`- gui.click {…} (act) → …`),
/// or only `command`'s, then the complications the surface honours and how replies read. On an
/// observe-only connection (`observe_only`) only the commands that observe are there.
pub fn help_text(
    registry: &Registry,
    surface: &dyn Surface,
    command: Option<&str>,
    observe_only: bool,
) -> Result<String, ToolError> {
    let lines = command_lines(surface, observe_only);
    if let Some(command) = command {
        let line = lines
            .iter()
            .find(|(names, _)| names.contains(&command))
            .map(|(_, line)| line.clone());
        return line.ok_or_else(|| {
            let acts = commands_of(surface).iter().any(|spec| spec.name == command);
            ToolError::invalid(match observe_only && acts {
                true => format!(
                    "{}.{command} acts, and this connection is observe-only: it offers the commands that observe",
                    surface.name()
                ),
                false => format!("the {} surface has no command `{command}`", surface.name()),
            })
            .at("args.command")
            .valid(
                commands_of(surface)
                    .iter()
                    .filter(|spec| !observe_only || spec.risk == Risk::Observe)
                    .map(|spec| spec.name),
            )
        });
    }
    let mut text: String = lines.into_iter().map(|(_, line)| line).collect();
    text.push_str(&complications_text(registry, surface));
    text.push_str(
        "Result: JSON of the fields after → (`?`: only when it applies; flags that are false and \
         empty outputs are left out); on failure ok:false and error {code, message, path?, \
         valid?}, code no_match (nothing matches: what is there instead) | ambiguous (the \
         matches listed) | action_failed | denied | invalid_call | unavailable | ...; cut (when \
         output was cut to max_bytes: its full size and the artifact file holding all of it); \
         evidence (when asked). The receipt id is in structuredContent and _meta.\n\
         Or {steps:[...], stop_on_error?=true, timeout_ms?, return?:{select:[\"$1.exit_code\"]}}: \
         several calls in one round, each decided and receipted on its own; \
         {\"ref\":\"$1.matches[0].ref\"} in a step's args is that value of step 1's result; \
         {wait:{ms}} pauses; the reply is the last step's result.\n\
         A call awaiting approval sends progress; a host timeout that progress does not reset \
         (often 60 s) cuts the wait short.",
    );
    if crate::call::own::offered_on(surface.name()) {
        text.push('\n');
        text.push_str(crate::call::own::JOB_DESCRIPTION);
    }
    text.push('\n');
    Ok(text)
}

/// Each command's line, commands with the same args, risk and result fields sharing one:
/// `- gui.cursor|move {} → x, y`. Returned with the names each line covers.
fn command_lines(surface: &dyn Surface, observe_only: bool) -> Vec<(Vec<&'static str>, String)> {
    let mut lines: Vec<(Vec<&'static str>, String, Risk, String)> = Vec::new();
    let specs = commands_of(surface);
    for spec in specs
        .iter()
        .filter(|spec| !observe_only || spec.risk == Risk::Observe)
    {
        // One line per command: a doc comment that spans lines is joined.
        let args = args_text(&(spec.args)().to_value()).replace('\n', " ");
        let fields = result_fields_of(surface, spec.name).join(", ");
        match lines.last_mut() {
            Some((names, last, risk, last_fields))
                if *last == args && *risk == spec.risk && *last_fields == fields =>
            {
                names.push(spec.name)
            }
            _ => lines.push((vec![spec.name], args, spec.risk, fields)),
        }
    }
    lines
        .into_iter()
        .map(|(names, args, risk, fields)| {
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
            let line = format!(
                "- {}.{} {{{args}}}{risk}{fields}\n",
                surface.name(),
                names.join("|")
            );
            (names, line)
        })
        .collect()
}

/// The complications a surface honours, each with its doc from the call type's schema.
fn complications_text(registry: &Registry, surface: &dyn Surface) -> String {
    let schema = call_schema();
    let Some(properties) = schema["properties"]["complications"]["properties"].as_object() else {
        return String::new();
    };
    let mut parts = Vec::new();
    for (name, property) in properties {
        let routed = name == "desktop" && crate::call::desktops::honoured_on(surface.name());
        if !surface.complications().contains(&name.as_str()) && !routed {
            continue;
        }
        if name == "evidence" && registry.evidence().is_none() {
            continue;
        }
        let doc = property["description"]
            .as_str()
            .unwrap_or_default()
            .trim_end_matches('.');
        parts.push(if property["properties"].is_object() {
            // An object's fields, each with its doc, then the object's doc.
            format!("- {name} {{{}}}", args_text(property).trim_end_matches('.'))
        } else {
            match type_text(property) {
                kind if kind.is_empty() => format!("- {name}: {doc}"),
                kind => format!("- {name}:{kind} {doc}"),
            }
        });
    }
    format!("complications (all optional):\n{}\n", parts.join("\n"))
}

/// The fields a command's reply may hold: the surface's own, or the daemon's for `job` and
/// `help`.
pub(crate) fn result_fields_of(surface: &dyn Surface, command: &str) -> &'static [&'static str] {
    if command == crate::call::own::JOB_COMMAND && crate::call::own::offered_on(surface.name()) {
        crate::call::own::JOB_RESULT_FIELDS
    } else if command == crate::call::own::HELP_COMMAND {
        crate::call::own::HELP_RESULT_FIELDS
    } else if crate::call::desktops::is_desktop_call(surface.name(), command)
        && crate::call::desktops::honoured_on(surface.name())
    {
        crate::call::desktops::DESKTOP_RESULT_FIELDS
    } else {
        surface.result_fields(command)
    }
}

/// A surface's commands as the tool lists them: its own, `job` where it honours `detach` (the
/// daemon serves that one, see `jobs.rs`) and `help` (see `help.rs`).
pub(crate) fn commands_of(surface: &dyn Surface) -> Vec<CommandSpec> {
    let mut commands = surface.commands().to_vec();
    if crate::call::own::offered_on(surface.name()) {
        commands.push(crate::call::own::job_spec());
    }
    if surface.name() == SurfaceName::Gui && crate::call::desktops::honoured_on(surface.name()) {
        commands.push(crate::call::desktops::desktop_spec());
    }
    commands.push(crate::call::own::help_spec());
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

/// The call's JSON Schema as generated from the ipc types (complications with their docs).
fn call_schema() -> Value {
    let settings = SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
        s.meta_schema = None;
    });
    let mut schema = settings
        .into_generator()
        .into_root_schema_for::<ComputerCall>()
        .to_value();
    strip(&mut schema);
    schema
}

/// The input schema: the call's shape with the surfaces and commands listed here; args and
/// complications are objects whose fields `help` teaches (the daemon checks them and names the
/// field it refuses), so the schema that rides in every prompt stays small. A call is either
/// surface+command or steps: neither is required on its own (several hosts refuse a top-level
/// `oneOf`); a step has the single call's shape.
pub(crate) fn input_schema(listed: &[&Arc<dyn Surface>]) -> Map<String, Value> {
    input_schema_of(listed, false)
}

/// [`input_schema`], its `command` enum only the commands that observe when `observe_only`:
/// an observe-only connection's schema offers nothing the daemon would refuse there.
fn input_schema_of(listed: &[&Arc<dyn Surface>], observe_only: bool) -> Map<String, Value> {
    let surfaces: Vec<Value> = listed.iter().map(|s| json!(s.name().as_str())).collect();
    let mut commands: Vec<&str> = listed
        .iter()
        .flat_map(|s| commands_of(s.as_ref()))
        .filter(|spec| !observe_only || spec.risk == Risk::Observe)
        .map(|spec| spec.name)
        .collect();
    commands.sort_unstable();
    commands.dedup();
    object(json!({
        "type": "object",
        "properties": {
            "surface": {"enum": surfaces},
            "command": {"enum": commands},
            "args": {"type": "object"},
            "complications": {"type": "object"},
            "steps": {"type": "array", "items": {"type": "object"}},
        },
    }))
}

/// What `structuredContent` holds: always `ok`; the receipt id when the call was receipted;
/// `error` when it failed; the command's own fields beside them (see `help`).
pub(crate) fn output_schema() -> Map<String, Value> {
    object(json!({
        "type": "object",
        "properties": {
            "ok": {"type": "boolean"},
            "receipt": {"type": "string"},
            "error": {
                "type": "object",
                "properties": {
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                    "path": {"type": "string"},
                    "valid": {"type": "array"},
                },
                "required": ["code", "message"],
            },
        },
        "required": ["ok"],
    }))
}

fn object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
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

    fn all_surfaces(registry: &Registry) -> Vec<&Arc<dyn Surface>> {
        registry.all().iter().collect()
    }

    fn shell(registry: &Registry) -> &Arc<dyn Surface> {
        registry
            .all()
            .iter()
            .find(|s| s.name() == SurfaceName::Shell)
            .expect("the shell surface")
    }

    /// The whole definition, every surface of this build listed, as `tools/list` sends it
    /// (`{"tools":[…]}` inside the JSON-RPC envelope), stays within 3 KB.
    #[test]
    fn the_tool_definition_fits_in_3_kb_with_every_surface() {
        let registry = Registry::for_this_platform(&Default::default());
        let all = all_surfaces(&registry);
        assert!(all.len() >= 4, "shell, gui, ax and keychain at least");
        let tool = definition(&registry, &all, "");
        let reply = json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [tool]}});
        let bytes = reply.to_string().len();
        println!("tools/list with every surface: {bytes} bytes");
        assert!(bytes <= 3 * 1024, "{bytes} bytes:\n{}", reply);
    }

    /// The description names every command of every surface, with the args it cannot do
    /// without (required ones, and alternatives such as `argv|script`), and marks acts.
    #[test]
    fn the_description_names_every_command_with_the_args_it_needs() {
        let registry = Registry::for_this_platform(&Default::default());
        let all = all_surfaces(&registry);
        let text = description(&registry, &all, false);
        for surface in &all {
            let line = text
                .lines()
                .find(|line| line.starts_with(&format!("{}: ", surface.name())))
                .unwrap_or_else(|| panic!("no line for {}:\n{text}", surface.name()));
            for spec in commands_of(surface.as_ref()) {
                let word = command_word(line, spec.name)
                    .unwrap_or_else(|| panic!("{} missing from {line}", spec.name));
                let schema = (spec.args)().to_value();
                for required in schema["required"].as_array().into_iter().flatten() {
                    assert!(
                        word.contains(required.as_str().unwrap()),
                        "{required} missing from {word}"
                    );
                }
                assert_eq!(
                    word.ends_with('!') && !word.ends_with("!!"),
                    spec.risk == Risk::Act,
                    "{word}"
                );
            }
        }
        assert!(text.contains("run{argv:[str]|script}!"), "{text}");
        assert!(text.contains("help"), "{text}");
    }

    /// A command's word in a surface's line: its name, its needed args in braces (which may
    /// hold spaces and braces), its risk mark.
    fn command_word<'a>(line: &'a str, name: &str) -> Option<&'a str> {
        let mut from = 0;
        while let Some(found) = line[from..].find(name) {
            let start = from + found;
            from = start + name.len();
            let before = line[..start].chars().last();
            let after = line[from..].chars().next();
            if before != Some(' ') || !matches!(after, None | Some('{' | '!' | ' ' | '\n')) {
                continue;
            }
            let mut depth = 0;
            let mut end = from;
            for (i, c) in line[from..].char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ' ' if depth == 0 => break,
                    _ => {}
                }
                end = from + i + c.len_utf8();
            }
            return Some(&line[start..end]);
        }
        None
    }

    /// `help` lists every command of its surface with every field its args type has and the
    /// fields its reply may hold: the text comes from the types `prepare` decodes.
    #[test]
    fn help_lists_every_command_with_its_args_and_results() {
        let registry = Registry::for_this_platform(&Default::default());
        for surface in all_surfaces(&registry) {
            let text = help_text(&registry, surface.as_ref(), None, false).unwrap();
            for spec in commands_of(surface.as_ref()) {
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
                    result_fields_of(surface.as_ref(), spec.name),
                    "result fields of {}.{}",
                    surface.name(),
                    spec.name
                );
                // One command asked for: its line alone.
                let one = help_text(&registry, surface.as_ref(), Some(spec.name), false).unwrap();
                assert_eq!(one, line.to_string() + "\n");
            }
            for honoured in surface.complications() {
                if *honoured != "evidence" || registry.evidence().is_some() {
                    assert!(
                        text.contains(&format!("{honoured} "))
                            || text.contains(&format!("{honoured}:")),
                        "{honoured} missing:\n{text}"
                    );
                }
            }
        }
    }

    #[test]
    fn help_for_a_command_the_surface_lacks_names_the_ones_it_has() {
        let registry = Registry::for_this_platform(&Default::default());
        let shell = shell(&registry);
        let error = help_text(&registry, shell.as_ref(), Some("click"), false).unwrap_err();
        assert_eq!(error.path.as_deref(), Some("args.command"));
        let valid = error.valid;
        assert!(
            valid.iter().any(|v| v == "run") && valid.iter().any(|v| v == "help"),
            "{valid:?}"
        );
    }

    /// Each command's line carries its own args' words, never another command's: `shell.send`
    /// says it types a stored secret, and `shell.read`'s wait bound is on `read`'s line.
    #[test]
    fn a_command_line_carries_its_own_docs() {
        let registry = Registry::for_this_platform(&Default::default());
        let shell = shell(&registry);
        let text = help_text(&registry, shell.as_ref(), None, false).unwrap();
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
