//! Refs between steps (`{"ref": "$N.path"}`): found in a step's args, parsed, and resolved
//! against the results of the steps before it.

use computer_ipc::ToolError;
use serde_json::{Map, Value, json};

/// Every `{"ref": "$…"}` inside `value`, with its JSON path.
pub(super) fn find_refs(value: &Value, path: &str, found: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            if let Some(text) = ref_text(map) {
                found.push((path.to_string(), text.to_string()));
                return;
            }
            for (key, child) in map {
                find_refs(child, &format!("{path}.{key}"), found);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                find_refs(child, &format!("{path}[{i}]"), found);
            }
        }
        _ => {}
    }
}

/// A ref is an object with one key, `ref`, whose value starts with `$` (an ax element ref is a
/// number, or a string of digits, so the two never meet).
pub(super) fn ref_text(map: &Map<String, Value>) -> Option<&str> {
    if map.len() != 1 {
        return None;
    }
    map.get("ref")?
        .as_str()
        .filter(|text| text.starts_with('$'))
}

/// `value` with every ref replaced by the value it names.
pub(super) fn resolve(
    value: &Value,
    path: &str,
    results: &[Option<Value>],
) -> Result<Value, ToolError> {
    Ok(match value {
        Value::Object(map) => {
            if let Some(text) = ref_text(map) {
                let parsed = RefPath::parse(text)
                    .map_err(|why| ToolError::invalid(why).at(path.to_string()))?;
                return parsed
                    .lookup(results)
                    .map_err(|why| ToolError::invalid(why).at(path.to_string()));
            }
            let mut out = Map::new();
            for (key, child) in map {
                out.insert(
                    key.clone(),
                    resolve(child, &format!("{path}.{key}"), results)?,
                );
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(
            items
                .iter()
                .enumerate()
                .map(|(i, child)| resolve(child, &format!("{path}[{i}]"), results))
                .collect::<Result<_, _>>()?,
        ),
        other => other.clone(),
    })
}

/// A parsed `$N.field[index]...`: step N (from 1) and the way into its result.
#[derive(Debug, PartialEq)]
pub(super) struct RefPath {
    pub(super) text: String,
    pub(super) step: usize,
    pub(super) parts: Vec<Part>,
}

#[derive(Debug, PartialEq)]
pub(super) enum Part {
    Field(String),
    Index(usize),
}

pub(super) const REF_SYNTAX: &str =
    "write `$N` then `.field` or `[index]` parts, e.g. `$1.matches[0].ref`";

impl RefPath {
    pub(super) fn parse(text: &str) -> Result<RefPath, String> {
        let bad = |why: &str| format!("`{text}` is not a ref: {why}; {REF_SYNTAX}");
        let rest = text
            .strip_prefix('$')
            .ok_or_else(|| bad("it does not start with `$`"))?;
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad("no step number after `$`"));
        }
        let step: usize = rest[..digits]
            .parse()
            .map_err(|_| bad("the step number is too large"))?;
        let mut rest = &rest[digits..];
        let mut parts = Vec::new();
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix('.') {
                let end = after.find(['.', '[']).unwrap_or(after.len());
                if end == 0 {
                    return Err(bad("an empty field name"));
                }
                parts.push(Part::Field(after[..end].to_string()));
                rest = &after[end..];
            } else if let Some(after) = rest.strip_prefix('[') {
                let end = after
                    .find(']')
                    .ok_or_else(|| bad("a `[` without its `]`"))?;
                let index = after[..end]
                    .parse()
                    .map_err(|_| bad("an index that is not a number"))?;
                parts.push(Part::Index(index));
                rest = &after[end + 1..];
            } else {
                return Err(bad(
                    "text after the step number that is not `.field` or `[index]`",
                ));
            }
        }
        Ok(RefPath {
            text: text.to_string(),
            step,
            parts,
        })
    }

    /// The value this ref names in the results so far, or what is there instead.
    pub(super) fn lookup(&self, results: &[Option<Value>]) -> Result<Value, String> {
        let step = self.step;
        let Some(Some(mut value)) = results.get(step.wrapping_sub(1)).map(Option::as_ref) else {
            return Err(format!(
                "`{}`: step {step} has no result (it did not run)",
                self.text
            ));
        };
        let mut walked = format!("${step}");
        let mut opened: Value;
        for part in &self.parts {
            // A text is addressed by what it holds: JSON text (`format: json`) as that JSON, any
            // other text as its lines, and an outline line as its ref, role and name.
            if let Value::String(text) = value
                && let Some(inner) = addressable_text(text)
            {
                opened = inner;
                value = &opened;
            }
            let next = match (part, value) {
                (Part::Field(name), Value::Object(map)) => map.get(name).ok_or_else(|| {
                    let keys: Vec<&str> = map.keys().map(String::as_str).collect();
                    format!(
                        "`{}`: `{walked}` has no field `{name}`; it has: {}",
                        self.text,
                        keys.join(", ")
                    )
                })?,
                (Part::Index(i), Value::Array(items)) => items.get(*i).ok_or_else(|| {
                    format!(
                        "`{}`: `{walked}` has {} item{}, so [{i}] is past its end",
                        self.text,
                        items.len(),
                        if items.len() == 1 { "" } else { "s" }
                    )
                })?,
                (part, other) => {
                    let wanted = match part {
                        Part::Field(name) => format!("field `{name}`"),
                        Part::Index(i) => format!("item [{i}]"),
                    };
                    return Err(format!(
                        "`{}`: `{walked}` is {}, which has no {wanted}",
                        self.text,
                        kind_of(other)
                    ));
                }
            };
            match part {
                Part::Field(name) => walked.push_str(&format!(".{name}")),
                Part::Index(i) => walked.push_str(&format!("[{i}]")),
            }
            value = next;
        }
        Ok(value.clone())
    }
}

/// What a text result holds, when a ref walks into it: JSON text as that JSON; an ax outline
/// (lines ending in a line break, each `[ref] role …`) as the list of its lines; one line of an ax outline (`[12] button "OK" …`, what `ax
/// find` and `ax tree` show) as `{"ref": 12, "role": "button", "name": "OK", "line": …}`, so
/// `$1.matches[0].ref` names the first match whichever format the step asked for. Any other
/// text is only a string.
pub(super) fn addressable_text(text: &str) -> Option<Value> {
    let trimmed = text.trim_start();
    if trimmed.starts_with(['[', '{'])
        && let Ok(parsed @ (Value::Array(_) | Value::Object(_))) =
            serde_json::from_str::<Value>(text)
    {
        return Some(parsed);
    }
    if text.contains('\n') {
        let lines: Vec<&str> = text
            .lines()
            .filter(|line| !line.trim().is_empty())
            .collect();
        return lines
            .iter()
            .all(|line| outline_line(line).is_some())
            .then(|| Value::Array(lines.iter().map(|line| json!(line)).collect()));
    }
    outline_line(text)
}

/// One line of an ax outline, `[ref] role "name"…` (the name in double quotes with `\"`, `\\`
/// and `\n` escaped, absent when the element has none), read into its parts.
pub(super) fn outline_line(line: &str) -> Option<Value> {
    let rest = line.trim_start_matches(' ').strip_prefix('[')?;
    let close = rest.find(']')?;
    let element: u64 = rest[..close].parse().ok()?;
    let rest = rest[close + 1..].strip_prefix(' ')?;
    let role_end = rest.find(' ').unwrap_or(rest.len());
    let role = &rest[..role_end];
    if role.is_empty() || !role.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    let mut name = String::new();
    if let Some(quoted) = rest[role_end..].strip_prefix(" \"") {
        let mut chars = quoted.chars();
        loop {
            match chars.next()? {
                '"' => break,
                '\\' => match chars.next()? {
                    'n' => name.push('\n'),
                    other => name.push(other),
                },
                c => name.push(c),
            }
        }
    }
    Some(json!({"ref": element, "role": role, "name": name, "line": line.trim_start_matches(' ')}))
}

pub(super) fn kind_of(value: &Value) -> String {
    match value {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("a boolean ({b})"),
        Value::Number(n) => format!("a number ({n})"),
        Value::String(_) => "a string".into(),
        Value::Array(items) => format!("a list of {}", items.len()),
        Value::Object(_) => "an object".into(),
    }
}
