//! The response budget: cuts text outputs to what the caller asked to see, says what was cut (and
//! where all of it is), keeps only the selected fields, and leaves out what would tell the model
//! nothing (absent values, flags at their usual `false`, empty outputs). The model declares; this
//! does the mechanics.

use std::path::Path;

use computer_ipc::{ReturnBudget, ReturnMode, ToolError};
use computer_surfaces::{Artifact, ArtifactQuota, CapturedText};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

pub const DEFAULT_MAX_BYTES: usize = 4000;
/// More than this would defeat the point of a budget; whole outputs live in artifacts.
pub const MAX_MAX_BYTES: usize = 1 << 20;

/// Flags that are news only when true: `false` is what every reply would say, so it is left out.
const QUIET_WHEN_FALSE: &[&str] = &["timed_out", "truncated", "unchanged"];

/// Fields that say a listing was cut, apps were skipped or a run was cut short: kept whatever
/// `select` names, so that a selected part never passes for the whole.
const CUT_SIGNS: &[&str] = &["truncated", "cursor", "skipped", "timed_out"];

/// A result field's name as `select` takes it: without the `?` that marks it as present only
/// when it applies.
/// Whether a command with these result fields reads back what it achieved (`effect` is among
/// them): such an act refused before it acted says `effect: refused`.
pub fn reports_effect(result_fields: &[&str]) -> bool {
    result_fields
        .iter()
        .any(|field| field_name(field) == computer_surfaces::kit::effect::EFFECT_FIELD)
}

pub fn field_name(field: &str) -> &str {
    field.strip_suffix('?').unwrap_or(field)
}

/// A checked budget.
#[derive(Debug, Clone)]
pub struct Budget {
    pub max_bytes: usize,
    pub mode: ReturnMode,
    pub select: Option<Vec<String>>,
    /// The command reads back what it achieved (`effect` is among its result fields): a
    /// refusal before it acted says `effect: refused`.
    pub reports_effect: bool,
}

impl Budget {
    /// Checks the caller's budget against the fields the command can return.
    pub fn from_request(
        request: Option<&ReturnBudget>,
        valid_fields: &[&str],
    ) -> Result<Budget, ToolError> {
        let request = request.cloned().unwrap_or_default();
        let max_bytes = request.max_bytes.unwrap_or(DEFAULT_MAX_BYTES);
        if max_bytes == 0 || max_bytes > MAX_MAX_BYTES {
            return Err(ToolError::invalid(format!(
                "max_bytes must be between 1 and {MAX_MAX_BYTES}"
            ))
            .at("complications.return.max_bytes"));
        }
        if let Some(select) = &request.select {
            for (index, field) in select.iter().enumerate() {
                if !valid_fields.iter().any(|valid| field_name(valid) == field) {
                    return Err(
                        ToolError::invalid(format!("unknown result field `{field}`"))
                            .at(format!("complications.return.select[{index}]"))
                            .valid(valid_fields.iter().map(|valid| field_name(valid))),
                    );
                }
            }
        }
        Ok(Budget {
            max_bytes,
            mode: request.mode.unwrap_or_default(),
            select: request.select,
            reports_effect: reports_effect(valid_fields),
        })
    }

    fn selected(&self, field: &str) -> bool {
        self.select
            .as_ref()
            .is_none_or(|select| select.iter().any(|s| s == field))
    }

    /// What each selected text gets of `max_bytes`, by index into `texts`.
    fn shares(&self, texts: &[CapturedText]) -> Vec<(usize, usize)> {
        let shown: Vec<usize> = (0..texts.len())
            .filter(|&i| self.selected(&texts[i].name))
            .collect();
        let sizes: Vec<u64> = shown.iter().map(|&i| texts[i].total_bytes).collect();
        shown
            .into_iter()
            .zip(share_budget(&sizes, self.max_bytes))
            .collect()
    }

    /// Writes the whole of each text this budget will cut that has no artifact yet (it fit in
    /// memory), so that every `cut` names a file holding all of it. Returns the files written,
    /// for the receipt. A text the artifacts quota has no room for keeps no file, and its `cut`
    /// says so.
    pub fn keep_whole_texts(
        &self,
        texts: &mut [CapturedText],
        dir: &Path,
        call_id: &str,
        quota: &ArtifactQuota,
    ) -> Vec<Artifact> {
        let mut written = Vec::new();
        for (i, share) in self.shares(texts) {
            let text = &mut texts[i];
            let cut = !(text.is_complete() && text.total_bytes as usize <= share);
            if !cut || text.artifact.is_some() || !text.is_complete() {
                continue;
            }
            let mut whole = text.head.clone();
            whole.extend_from_slice(&text.tail);
            let path = dir.join(format!("{call_id}.{}", text.name));
            let artifact = match quota.reserve(whole.len() as u64) {
                Ok(()) => match std::fs::write(&path, &whole) {
                    Ok(()) => Artifact {
                        name: text.name.clone(),
                        path,
                        sha256: hex::encode(Sha256::digest(&whole)),
                        bytes: whole.len() as u64,
                        truncated: false,
                        cut: None,
                    },
                    Err(err) => {
                        quota.release(whole.len() as u64);
                        tracing::warn!(path = %path.display(), error = %err, "writing a cut output's artifact failed");
                        continue;
                    }
                },
                Err(full) => Artifact {
                    name: text.name.clone(),
                    path,
                    sha256: String::new(),
                    bytes: 0,
                    truncated: true,
                    cut: Some(computer_surfaces::kit::capture::ArtifactCut {
                        reason: "quota",
                        message: format!("not written: {full}"),
                    }),
                },
            };
            if artifact.bytes > 0 {
                written.push(artifact.clone());
            }
            text.artifact = Some(artifact);
        }
        written
    }

    /// Builds the model-visible fields: `fields` and the texts cut to the budget, with a `cut`
    /// entry for every text that was shortened. Left out: fields not selected (except the signs
    /// of a cut listing), absent (`null`) values, quiet flags at `false`, and empty texts.
    pub fn apply(&self, fields: &Map<String, Value>, texts: &[CapturedText]) -> Map<String, Value> {
        let mut out = Map::new();
        for (key, value) in fields {
            let quiet = value.is_null()
                || (*value == Value::Bool(false) && QUIET_WHEN_FALSE.contains(&key.as_str()));
            if !quiet && (self.selected(key) || CUT_SIGNS.contains(&key.as_str())) {
                out.insert(key.clone(), value.clone());
            }
        }
        let mut cut = Map::new();
        for (i, share) in self.shares(texts) {
            let text = &texts[i];
            if text.total_bytes == 0 {
                continue;
            }
            let (rendered, was_cut) = render(text, share, self.mode);
            out.insert(text.name.clone(), Value::String(rendered.text));
            if was_cut {
                let mut note = json!({
                    "bytes": text.total_bytes,
                    "shown": rendered.shown_bytes,
                    "mode": mode_name(self.mode),
                });
                if let Some(artifact) = &text.artifact {
                    if artifact.bytes > 0 {
                        note["artifact"] = json!(artifact.path);
                    }
                    if let Some(cut) = &artifact.cut {
                        note["artifact_cut"] = json!(cut);
                    }
                }
                cut.insert(text.name.clone(), note);
            }
        }
        if !cut.is_empty() {
            out.insert("cut".into(), Value::Object(cut));
        }
        out
    }
}

fn mode_name(mode: ReturnMode) -> &'static str {
    match mode {
        ReturnMode::Head => "head",
        ReturnMode::Tail => "tail",
        ReturnMode::HeadTail => "head_tail",
    }
}

/// Splits `max` bytes among texts of the given sizes: each gets an equal share, and what a short
/// text leaves unused goes to the longer ones.
fn share_budget(sizes: &[u64], max: usize) -> Vec<usize> {
    let mut shares = vec![0usize; sizes.len()];
    let mut open: Vec<usize> = (0..sizes.len()).collect();
    let mut left = max;
    while !open.is_empty() && left > 0 {
        let each = (left / open.len()).max(1);
        let mut still_open = Vec::new();
        for &i in &open {
            let want = (sizes[i] as usize).saturating_sub(shares[i]);
            let give = want.min(each).min(left);
            shares[i] += give;
            left -= give;
            if (sizes[i] as usize) > shares[i] {
                still_open.push(i);
            }
        }
        if still_open.len() == open.len() && each == 1 && left == 0 {
            break;
        }
        open = still_open;
    }
    shares
}

struct Rendered {
    text: String,
    shown_bytes: usize,
}

fn render(text: &CapturedText, share: usize, mode: ReturnMode) -> (Rendered, bool) {
    if text.is_complete() && text.total_bytes as usize <= share {
        let mut whole = text.head.clone();
        whole.extend_from_slice(&text.tail);
        let shown_bytes = whole.len();
        return (
            Rendered {
                text: String::from_utf8_lossy(&whole).into_owned(),
                shown_bytes,
            },
            false,
        );
    }
    // Everything known, in order: the head, then (after a gap when the middle was not kept) the
    // tail. Cuts land on UTF-8 character boundaries.
    let head = &text.head;
    // The known end of the stream: the tail window, or the head when everything fit in it.
    let end = if text.tail.is_empty() {
        head
    } else {
        &text.tail
    };
    let (front, back): (&[u8], &[u8]) = match mode {
        ReturnMode::Head => (take_head(head, share), &[]),
        ReturnMode::Tail => (&[], take_tail(end, share)),
        ReturnMode::HeadTail => {
            let front_share = share / 2;
            (
                take_head(head, front_share),
                take_tail(end, share - front_share),
            )
        }
    };
    let skipped = text.total_bytes as usize - front.len() - back.len();
    let mut rendered = String::from_utf8_lossy(front).into_owned();
    let marker = format!("\n…[{skipped} bytes cut]…\n");
    match mode {
        ReturnMode::Head => rendered.push_str(&marker),
        ReturnMode::Tail => {
            rendered = format!("{}{}", marker.trim_start(), String::from_utf8_lossy(back))
        }
        ReturnMode::HeadTail => {
            rendered.push_str(&marker);
            rendered.push_str(&String::from_utf8_lossy(back));
        }
    }
    (
        Rendered {
            text: rendered,
            shown_bytes: front.len() + back.len(),
        },
        true,
    )
}

/// The first `n` bytes, cut at a char boundary.
fn take_head(bytes: &[u8], n: usize) -> &[u8] {
    &bytes[..char_floor(bytes, n.min(bytes.len()))]
}

/// The last `n` bytes, cut at a char boundary.
fn take_tail(bytes: &[u8], n: usize) -> &[u8] {
    &bytes[char_ceil(bytes, bytes.len().saturating_sub(n))..]
}

/// Largest index ≤ `i` that starts a UTF-8 character.
fn char_floor(bytes: &[u8], mut i: usize) -> usize {
    while i > 0 && i < bytes.len() && is_continuation(bytes[i]) {
        i -= 1;
    }
    i
}

/// Smallest index ≥ `i` that starts a UTF-8 character.
fn char_ceil(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() && is_continuation(bytes[i]) {
        i += 1;
    }
    i
}

fn is_continuation(byte: u8) -> bool {
    byte & 0b1100_0000 == 0b1000_0000
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(name: &str, body: &str) -> CapturedText {
        CapturedText::from_bytes(name, body.as_bytes().to_vec())
    }

    fn budget(max: usize, mode: ReturnMode) -> Budget {
        Budget {
            max_bytes: max,
            mode,
            select: None,
            reports_effect: false,
        }
    }

    #[test]
    fn small_outputs_pass_whole() {
        let out = budget(100, ReturnMode::HeadTail).apply(&Map::new(), &[text("stdout", "hi\n")]);
        assert_eq!(out["stdout"], "hi\n");
        assert!(!out.contains_key("cut"));
    }

    #[test]
    fn modes_keep_the_asked_part_and_say_what_was_cut() {
        let long = "a".repeat(50) + &"z".repeat(50);
        let head = budget(10, ReturnMode::Head).apply(&Map::new(), &[text("stdout", &long)]);
        assert!(
            head["stdout"]
                .as_str()
                .unwrap()
                .starts_with("aaaaaaaaaa\n…[90 bytes cut]")
        );
        assert_eq!(head["cut"]["stdout"]["bytes"], 100);
        assert_eq!(head["cut"]["stdout"]["shown"], 10);

        let tail = budget(10, ReturnMode::Tail).apply(&Map::new(), &[text("stdout", &long)]);
        assert!(
            tail["stdout"].as_str().unwrap().ends_with("]…\nzzzzzzzzzz"),
            "{tail:?}"
        );

        let both = budget(10, ReturnMode::HeadTail).apply(&Map::new(), &[text("stdout", &long)]);
        let shown = both["stdout"].as_str().unwrap();
        assert!(
            shown.starts_with("aaaaa\n") && shown.ends_with("\nzzzzz"),
            "{shown:?}"
        );
    }

    #[test]
    fn cuts_never_split_a_character() {
        let out = budget(5, ReturnMode::Head).apply(&Map::new(), &[text("stdout", "ééééé")]);
        assert!(
            out["stdout"].as_str().unwrap().starts_with("éé\n"),
            "{out:?}"
        );
    }

    #[test]
    fn budget_is_shared_and_unused_share_moves_over() {
        assert_eq!(share_budget(&[3, 100], 10), vec![3, 7]);
        assert_eq!(share_budget(&[100, 100], 10), vec![5, 5]);
        assert_eq!(share_budget(&[0, 0], 10), vec![0, 0]);
    }

    #[test]
    fn what_says_nothing_is_left_out() {
        let mut fields = Map::new();
        fields.insert("exit_code".into(), json!(0));
        fields.insert("signal".into(), Value::Null);
        fields.insert("timed_out".into(), json!(false));
        fields.insert("met".into(), json!(false));
        let out = budget(100, ReturnMode::HeadTail)
            .apply(&fields, &[text("stdout", "hi\n"), text("stderr", "")]);
        // `met: false` is the answer, not a default: only the listed quiet flags go.
        assert_eq!(
            out.keys().collect::<Vec<_>>(),
            vec!["exit_code", "met", "stdout"]
        );
        fields.insert("timed_out".into(), json!(true));
        let out = budget(100, ReturnMode::HeadTail).apply(&fields, &[]);
        assert_eq!(out["timed_out"], true);
    }

    #[test]
    fn select_never_hides_a_cut() {
        let b = Budget::from_request(
            Some(&ReturnBudget {
                select: Some(vec!["tree".into()]),
                ..Default::default()
            }),
            &["tree?", "revision", "cursor?", "truncated?"],
        )
        .unwrap();
        let mut fields = Map::new();
        fields.insert("revision".into(), json!("abc"));
        fields.insert("cursor".into(), json!("3.f00"));
        fields.insert("truncated".into(), json!(true));
        let out = b.apply(&fields, &[text("tree", "[1] window\n")]);
        assert_eq!(
            out.keys().collect::<Vec<_>>(),
            vec!["cursor", "tree", "truncated"]
        );
        fields.insert("cursor".into(), Value::Null);
        fields.insert("truncated".into(), json!(false));
        let out = b.apply(&fields, &[text("tree", "[1] window\n")]);
        assert_eq!(out.keys().collect::<Vec<_>>(), vec!["tree"]);
    }

    #[test]
    fn a_cut_text_gets_a_file_holding_all_of_it() {
        let dir = tempfile::tempdir().unwrap();
        let quota = ArtifactQuota::unlimited();
        let long = "x".repeat(50);
        let mut texts = vec![text("stdout", &long), text("stderr", "short")];
        let b = budget(20, ReturnMode::Head);
        let written = b.keep_whole_texts(&mut texts, dir.path(), "c1", &quota);
        assert_eq!(written.len(), 1, "only the text that is cut: {written:?}");
        assert_eq!(std::fs::read_to_string(&written[0].path).unwrap(), long);
        let out = b.apply(&Map::new(), &texts);
        assert_eq!(out["cut"]["stdout"]["artifact"], json!(written[0].path));
        assert!(out["cut"].get("stderr").is_none());
    }

    #[test]
    fn select_keeps_only_named_fields() {
        let b = Budget::from_request(
            Some(&ReturnBudget {
                select: Some(vec!["exit_code".into()]),
                ..Default::default()
            }),
            &["exit_code", "stdout"],
        )
        .unwrap();
        let mut fields = Map::new();
        fields.insert("exit_code".into(), json!(0));
        fields.insert("timed_out".into(), json!(false));
        let out = b.apply(&fields, &[text("stdout", "x")]);
        assert_eq!(out.keys().collect::<Vec<_>>(), vec!["exit_code"]);

        let err = Budget::from_request(
            Some(&ReturnBudget {
                select: Some(vec!["exit".into()]),
                ..Default::default()
            }),
            &["exit_code", "stdout"],
        )
        .unwrap_err();
        assert_eq!(err.path.as_deref(), Some("complications.return.select[0]"));
        assert_eq!(err.valid, vec!["exit_code", "stdout"]);
    }
}
