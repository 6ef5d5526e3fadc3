//! A call's words read as paths: made absolute, variables policy cannot know marked, symlinks
//! resolved, and held against a list of paths.

use std::path::{Component, Path, PathBuf};

use regex::Regex;

pub(super) fn never_matching() -> Regex {
    Regex::new("[^\\s\\S]").unwrap_or_else(|_| unreachable!("a constant regex"))
}

/// A call's words read as paths, made on first need and shared by every check of one decision.
pub(super) type CallWords = std::cell::OnceCell<Vec<PathSpelling>>;

/// What a word holding a variable policy cannot know the value of names: anything (the
/// daemon's own paths, denied in doubt), or nothing (login files, which containment holds).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Unknown {
    MayName,
    NamesNothing,
}

/// A word of a call read as a path, as [`RulePolicy::spelling`] reads it.
pub(super) struct PathSpelling {
    pub(super) components: Vec<String>,
    /// With symlinks resolved as far as the path exists; `None` for a glob.
    pub(super) resolved: Option<Vec<String>>,
}

impl PathSpelling {
    /// Whether a component holds a variable's value that policy cannot know.
    pub(super) fn holds_unknown(&self) -> bool {
        self.components.iter().any(|c| c.contains(UNKNOWN_VALUE))
    }

    /// Whether it is `protected` or inside it, as written or through a symlink.
    pub(super) fn names(&self, protected: &[String]) -> bool {
        inside(&self.components, protected)
            || self
                .resolved
                .as_ref()
                .is_some_and(|resolved| inside(resolved, protected))
    }
}

/// `${NAME...}` or `$NAME`.
pub(super) static VARIABLE_REFERENCE: std::sync::LazyLock<Regex> = std::sync::LazyLock::new(|| {
    Regex::new(r"\$\{([A-Za-z_][A-Za-z0-9_]*)[^}]*\}|\$([A-Za-z_][A-Za-z0-9_]*)")
        .unwrap_or_else(|_| never_matching())
});

/// `path` made absolute from `base` with `.`, `..` and repeated slashes resolved, as components.
pub(super) fn lexical(path: &Path, base: &Path) -> Vec<String> {
    let joined = if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    };
    let mut parts: Vec<String> = Vec::new();
    for component in joined.components() {
        match component {
            Component::Normal(part) => parts.push(part.to_string_lossy().into_owned()),
            Component::ParentDir => {
                parts.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    parts
}

/// The components with symlinks resolved as far as the path exists.
pub(super) fn resolve_symlinks(components: &[String]) -> Vec<String> {
    for existing in (1..=components.len()).rev() {
        let prefix: PathBuf = std::iter::once("/".to_string())
            .chain(components[..existing].iter().cloned())
            .collect();
        if let Ok(real) = prefix.canonicalize() {
            let mut resolved = lexical(&real, Path::new("/"));
            resolved.extend(components[existing..].iter().cloned());
            return resolved;
        }
    }
    components.to_vec()
}

/// Whether `candidate` (whose components may be globs) is `protected` or inside it.
pub(super) fn inside(candidate: &[String], protected: &[String]) -> bool {
    candidate.len() >= protected.len()
        && candidate
            .iter()
            .zip(protected)
            .all(|(part, fixed)| component_matches(part, fixed))
}

/// Stands for a variable whose value is not known before the run: unlike a glob's `*`, it may
/// stand for a name that starts with a dot.
pub(super) const UNKNOWN_VALUE: char = '\u{1}';

pub(super) fn component_matches(part: &str, fixed: &str) -> bool {
    if part == fixed {
        return true;
    }
    if !part.contains(['*', '?', '[', UNKNOWN_VALUE]) {
        return false;
    }
    // As in the shell, a glob matches a leading dot only when it spells it.
    if fixed.starts_with('.') && !part.starts_with(['.', UNKNOWN_VALUE]) {
        return false;
    }
    let mut regex = String::from("^");
    let mut chars = part.chars();
    while let Some(c) = chars.next() {
        match c {
            '*' | UNKNOWN_VALUE => regex.push_str(".*"),
            '?' => regex.push('.'),
            '[' => {
                // A bracket expression stands for one character; which ones is not worked out.
                for next in chars.by_ref() {
                    if next == ']' {
                        break;
                    }
                }
                regex.push('.');
            }
            other => regex.push_str(&regex::escape(&other.to_string())),
        }
    }
    regex.push('$');
    Regex::new(&regex).is_ok_and(|r| r.is_match(fixed))
}
