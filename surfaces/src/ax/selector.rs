//! The selector language: parsing `window "Settings" > button ~"OK"[focused]:2` into steps, and
//! testing one node against a step (a backend's node among them). Walking and ordinals are the
//! tree's business.

use regex::Regex;

use crate::accessibility::backend::{NativeFacts, Node};
use crate::accessibility::roles::{StateQuery, StateSet, accesskit_role_names, fold, parse_state};

/// A parsed selector: steps from the outermost ancestor to the target.
#[derive(Debug, Clone)]
pub struct Selector {
    pub steps: Vec<Step>,
    pub source: String,
}

/// One step: every present part must hold.
#[derive(Debug, Clone, Default)]
pub struct Step {
    /// Folded role name; `None` for any role (`*` or omitted).
    pub role: Option<String>,
    pub name: Option<TextMatch>,
    pub filters: Vec<Filter>,
    /// 1-based position among this step's matches, in document order.
    pub ordinal: Option<usize>,
}

#[derive(Debug, Clone)]
pub enum TextMatch {
    Exact(String),
    /// Case-insensitive substring, stored lower-cased.
    Contains(String),
    Regex(Regex),
}

impl TextMatch {
    pub fn test(&self, text: &str) -> bool {
        match self {
            TextMatch::Exact(want) => text == want,
            TextMatch::Contains(want) => text.to_lowercase().contains(want.as_str()),
            TextMatch::Regex(re) => re.is_match(text),
        }
    }
}

#[derive(Debug, Clone)]
pub enum Filter {
    State { query: StateQuery, negated: bool },
    Attr { key: String, value: TextMatch },
}

impl Filter {
    /// Whether this filter needs the node's object attributes (or its id, which app caches do
    /// not carry) fetched.
    pub fn needs_attributes(&self) -> bool {
        matches!(self, Filter::Attr { key, .. } if key != "description")
    }
}

/// What a selector needs to know of a node.
pub trait NodeFacts {
    /// The folded accesskit role name and the folded native (AT-SPI, AX) role name.
    fn roles(&self) -> (String, String);
    fn name(&self) -> &str;
    fn states(&self) -> StateSet;
    /// `description`, `id` or an object attribute.
    fn attr(&self, key: &str) -> Option<String>;
}

/// A backend's node, as selectors test it.
impl<E, N: NativeFacts> NodeFacts for Node<E, N> {
    fn roles(&self) -> (String, String) {
        self.folded_roles()
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn states(&self) -> StateSet {
        self.states
    }
    fn attr(&self, key: &str) -> Option<String> {
        match key {
            "description" => Some(self.description.clone()),
            "id" => Some(self.id.clone()),
            _ => self.attributes.get(key).cloned(),
        }
    }
}

impl Step {
    pub fn matches(&self, node: &impl NodeFacts) -> bool {
        if let Some(role) = &self.role {
            let (ak, atspi) = node.roles();
            if *role != ak && *role != atspi {
                return false;
            }
        }
        if let Some(name) = &self.name
            && !name.test(node.name())
        {
            return false;
        }
        self.filters.iter().all(|filter| match filter {
            Filter::State { query, negated } => query.holds(node.states()) != *negated,
            Filter::Attr { key, value } => node.attr(key).is_some_and(|v| value.test(&v)),
        })
    }
}

impl Selector {
    pub fn needs_attributes(&self) -> bool {
        self.steps
            .iter()
            .any(|s| s.filters.iter().any(Filter::needs_attributes))
    }

    /// The attribute keys the selector tests, for backends that read attributes one by one.
    pub fn attribute_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self
            .steps
            .iter()
            .flat_map(|s| s.filters.iter())
            .filter(|f| f.needs_attributes())
            .filter_map(|f| match f {
                Filter::Attr { key, .. } => Some(key.clone()),
                Filter::State { .. } => None,
            })
            .collect();
        keys.sort();
        keys.dedup();
        keys
    }
}

/// A parse failure: where, and what was expected there.
#[derive(Debug, Clone, PartialEq)]
pub struct ParseError {
    /// 0-based character position.
    pub position: usize,
    pub message: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at character {}: {}", self.position, self.message)
    }
}

/// Parses a selector; see the module docs for the grammar. `knows_role` says which (folded)
/// role names the backend understands.
pub fn parse(source: &str, knows_role: fn(&str) -> bool) -> Result<Selector, ParseError> {
    let mut parser = Parser {
        chars: source.chars().collect(),
        pos: 0,
        knows_role,
    };
    let mut steps = vec![parser.step()?];
    loop {
        parser.skip_spaces();
        match parser.peek() {
            None => break,
            Some('>') => {
                parser.pos += 1;
                steps.push(parser.step()?);
            }
            Some(c) => {
                return Err(parser.error(format!(
                    "expected `>` (then an inner step) or the end, found `{c}`"
                )));
            }
        }
    }
    Ok(Selector {
        steps,
        source: source.to_string(),
    })
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    knows_role: fn(&str) -> bool,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn skip_spaces(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.pos += 1;
        }
    }

    fn error(&self, message: impl Into<String>) -> ParseError {
        ParseError {
            position: self.pos,
            message: message.into(),
        }
    }

    fn step(&mut self) -> Result<Step, ParseError> {
        self.skip_spaces();
        let start = self.pos;
        let mut step = Step::default();
        match self.peek() {
            Some('*') => self.pos += 1,
            Some(c) if c.is_ascii_alphabetic() => {
                let word = self.word();
                let folded = fold(&word);
                if !(self.knows_role)(&folded) {
                    let pos = self.pos;
                    self.pos = start;
                    let mut err = self.error(format!(
                        "unknown role `{word}`; roles are accesskit names such as button, checkBox, textInput, window, dialog, menuItem, label, link, tab, listItem ({})",
                        suggest_role(&folded)
                    ));
                    self.pos = pos;
                    err.position = start;
                    return Err(err);
                }
                step.role = Some(folded);
            }
            _ => {}
        }
        self.skip_spaces();
        match self.peek() {
            Some('"') => step.name = Some(TextMatch::Exact(self.string()?)),
            Some('~') => {
                self.pos += 1;
                if self.peek() != Some('"') {
                    return Err(self.error("expected a quoted name after `~`, e.g. ~\"Sav\""));
                }
                step.name = Some(TextMatch::Contains(self.string()?.to_lowercase()));
            }
            Some('/') => step.name = Some(TextMatch::Regex(self.regex()?)),
            _ => {}
        }
        loop {
            self.skip_spaces();
            if self.peek() != Some('[') {
                break;
            }
            self.pos += 1;
            step.filters.push(self.filter()?);
        }
        self.skip_spaces();
        if matches!(self.peek(), Some(':') | Some('#')) {
            self.pos += 1;
            let digits_at = self.pos;
            let digits: String = std::iter::from_fn(|| {
                let c = self.peek().filter(char::is_ascii_digit)?;
                self.pos += 1;
                Some(c)
            })
            .collect();
            match digits.parse::<usize>() {
                Ok(n) if n >= 1 => step.ordinal = Some(n),
                _ => {
                    self.pos = digits_at;
                    return Err(self.error("expected an ordinal of 1 or more, e.g. :2"));
                }
            }
        }
        if self.pos == start
            || (step.role.is_none()
                && step.name.is_none()
                && step.filters.is_empty()
                && self.chars.get(start) != Some(&'*'))
        {
            self.pos = start.max(self.pos);
            return Err(self.error(
                "expected a step: a role (button), a name (\"Save\", ~\"Sav\", /S.v+/), a filter ([focused]) or `*`",
            ));
        }
        Ok(step)
    }

    fn word(&mut self) -> String {
        let mut word = String::new();
        while let Some(c) = self
            .peek()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        {
            word.push(c);
            self.pos += 1;
        }
        word
    }

    /// A double-quoted string with `\"` and `\\` escapes; the cursor is on the opening quote.
    fn string(&mut self) -> Result<String, ParseError> {
        let open = self.pos;
        self.pos += 1;
        let mut text = String::new();
        loop {
            match self.peek() {
                None => {
                    self.pos = open;
                    return Err(self.error("unterminated string: add the closing `\"`"));
                }
                Some('"') => {
                    self.pos += 1;
                    return Ok(text);
                }
                Some('\\') => {
                    self.pos += 1;
                    match self.peek() {
                        Some(c) => text.push(c),
                        None => return Err(self.error("expected a character after `\\`")),
                    }
                    self.pos += 1;
                }
                Some(c) => {
                    text.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    /// `/pattern/` or `/pattern/i`; `\/` escapes a slash.
    fn regex(&mut self) -> Result<Regex, ParseError> {
        let open = self.pos;
        self.pos += 1;
        let mut pattern = String::new();
        loop {
            match self.peek() {
                None => {
                    self.pos = open;
                    return Err(self.error("unterminated regex: add the closing `/`"));
                }
                Some('/') => {
                    self.pos += 1;
                    break;
                }
                Some('\\') if self.chars.get(self.pos + 1) == Some(&'/') => {
                    pattern.push('/');
                    self.pos += 2;
                }
                Some(c) => {
                    pattern.push(c);
                    self.pos += 1;
                }
            }
        }
        if self.peek() == Some('i') {
            self.pos += 1;
            pattern.insert_str(0, "(?i)");
        }
        Regex::new(&pattern).map_err(|err| ParseError {
            position: open,
            message: format!("invalid regex: {err}"),
        })
    }

    /// After `[`: `state`, `!state`, `key="v"`, `key~"v"` or `key=/re/`, then `]`.
    fn filter(&mut self) -> Result<Filter, ParseError> {
        self.skip_spaces();
        let negated = self.peek() == Some('!');
        if negated {
            self.pos += 1;
        }
        let at = self.pos;
        let key = self.word();
        if key.is_empty() {
            return Err(self.error("expected a state (focused, checked, ...) or an attribute key"));
        }
        self.skip_spaces();
        let filter = match self.peek() {
            Some(']') => match parse_state(&key) {
                Some(query) => Filter::State { query, negated },
                None => {
                    self.pos = at;
                    return Err(self.error(format!(
                        "unknown state `{key}`; states: focused, focusable, checked, pressed, selected, expanded, collapsed, editable, enabled, disabled, visible, showing, active, modal"
                    )));
                }
            },
            Some('=') | Some('~') if !negated => {
                let contains = self.peek() == Some('~');
                self.pos += 1;
                if contains && self.peek() == Some('=') {
                    self.pos += 1;
                }
                self.skip_spaces();
                let value = match self.peek() {
                    Some('"') if contains => TextMatch::Contains(self.string()?.to_lowercase()),
                    Some('"') => TextMatch::Exact(self.string()?),
                    Some('/') => TextMatch::Regex(self.regex()?),
                    _ => return Err(self.error("expected a quoted value or /regex/")),
                };
                Filter::Attr { key, value }
            }
            _ => return Err(self.error("expected `]`, `=` or `~`")),
        };
        self.skip_spaces();
        if self.peek() != Some(']') {
            return Err(self.error("expected `]`"));
        }
        self.pos += 1;
        Ok(filter)
    }
}

fn suggest_role(folded: &str) -> String {
    let close: Vec<&String> = accesskit_role_names()
        .iter()
        .filter(|name| name.contains(folded) || folded.contains(name.as_str()))
        .take(5)
        .collect();
    if close.is_empty() {
        "see `ax tree` for the roles present".into()
    } else {
        format!(
            "close: {}",
            close
                .iter()
                .map(|n| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The accesskit names, and one AT-SPI name as a backend would add.
    fn parse(source: &str) -> Result<Selector, ParseError> {
        super::parse(source, |role| {
            role == "togglebutton" || accesskit_role_names().iter().any(|n| n == role)
        })
    }

    #[test]
    fn simple_forms_parse() {
        let s = parse("button \"Yes\"").unwrap();
        assert_eq!(s.steps.len(), 1);
        assert_eq!(s.steps[0].role.as_deref(), Some("button"));
        assert!(matches!(&s.steps[0].name, Some(TextMatch::Exact(n)) if n == "Yes"));

        let s = parse("window \"Settings\" > checkBox ~\"dark\"[!checked]:2").unwrap();
        assert_eq!(s.steps.len(), 2);
        assert_eq!(s.steps[1].ordinal, Some(2));
        assert_eq!(s.steps[1].filters.len(), 1);

        let s = parse("/S.v+/i #3").unwrap();
        assert!(s.steps[0].role.is_none());
        assert_eq!(s.steps[0].ordinal, Some(3));

        let s = parse("[focused]").unwrap();
        assert_eq!(s.steps[0].filters.len(), 1);
        let s = parse("* [toolkit=\"GTK\"]").unwrap();
        assert!(s.needs_attributes());
        let s = parse("toggle_button \"a\\\"b\"").unwrap();
        assert!(matches!(&s.steps[0].name, Some(TextMatch::Exact(n)) if n == "a\"b"));
    }

    #[test]
    fn errors_name_the_position_and_the_expectation() {
        let err = parse("button \"Yes").unwrap_err();
        assert_eq!(err.position, 7);
        assert!(err.message.contains("unterminated"), "{err}");
        let err = parse("buton \"Yes\"").unwrap_err();
        assert_eq!(err.position, 0);
        assert!(err.message.contains("unknown role"), "{err}");
        let err = parse("button > ").unwrap_err();
        assert_eq!(err.position, 9);
        let err = parse("button [nonsense]").unwrap_err();
        assert!(err.message.contains("unknown state"), "{err}");
        let err = parse("button :0").unwrap_err();
        assert!(err.message.contains("ordinal"), "{err}");
        let err = parse("button \"a\" \"b\"").unwrap_err();
        assert_eq!(err.position, 11);
    }
}
