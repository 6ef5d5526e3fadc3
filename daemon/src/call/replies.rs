//! What a call answers: a reply in its three parts (the model's text, the structured content,
//! the receipt id in `_meta`), an error as a reply, and a failed action's error and result body,
//! the same however the action ran (a call, a step, a detached job).

use computer_ipc::ErrorCode;
use computer_ipc::ToolError;
use computer_surfaces::kit::effect::EFFECT_FIELD;
use computer_surfaces::{Effect, SurfaceError};
use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::{Map, Value, json};

/// How an action's outcome was shaped for its caller and its receipt.
pub(crate) struct Shaped {
    pub(crate) reply: CallToolResult,
    pub(crate) body: Value,
}

/// A failed action as its caller reads it. A surface's own error keeps everything it says
/// (code, path, valid choices); an action refused because it targets an approver is `denied`;
/// any other failure is `action_failed`. The flag says the refusal was of the approver kind.
pub(crate) fn failure_error(err: SurfaceError) -> (ToolError, bool) {
    match err {
        SurfaceError::Tool(error) => (error, false),
        SurfaceError::Refused { message } => (ToolError::new(ErrorCode::Denied, message), true),
        err => (
            ToolError::new(ErrorCode::ActionFailed, err.to_string()),
            false,
        ),
    }
}

/// Whether an error says the call was refused before it acted: a policy denial, a person's
/// refusal, an approver's target, and the codes of the checks right before acting (a target
/// that changed since it was seen, a person's input).
pub(crate) fn refused_before_acting(error: &ToolError) -> bool {
    matches!(
        error.code,
        ErrorCode::Denied | ErrorCode::Stale | ErrorCode::InterruptedByPerson
    )
}

/// A failed action's error and result body, however it ran (a call, a step, a detached job):
/// a surface's own error stays whole, a refusal to act on an approver is marked, and an act
/// that reads back its effect (`reports_effect`) and failed before anything was sent says
/// `effect: refused`.
pub(crate) fn failure_body(
    call_id: &str,
    err: SurfaceError,
    reports_effect: bool,
) -> (ToolError, Value) {
    let nothing_sent = matches!(
        err,
        SurfaceError::Refused { .. } | SurfaceError::NothingSent { .. }
    );
    let (error, refused) = failure_error(err);
    let mut body = json!({"ok": false, "error": error});
    if refused {
        tracing::warn!(%call_id, message = %error.message, "action refused: it targets an approver");
        body["refused"] = json!("targets_approver");
    }
    if reports_effect && (nothing_sent || refused_before_acting(&error)) {
        body[EFFECT_FIELD] = json!(Effect::Refused);
    }
    (error, body)
}

/// Adds a field to a result's structured content and keeps its text rendering in step.
pub(crate) fn attach_field(result: &mut CallToolResult, key: &str, value: Value) {
    if let Some(Value::Object(map)) = result.structured_content.as_mut() {
        map.insert(key.to_string(), value);
        let text = model_text(map);
        if let Some(first) = result.content.first_mut() {
            *first = ContentBlock::text(text);
        }
    }
}

/// A reply in its three parts. The text block, which is what the model reads, carries the
/// fields alone (and `ok` only when it is false: `isError` and the fields say the rest). The
/// structured content adds `ok` and the receipt id for programs (`computer call --json` prints
/// it), and `_meta` holds the receipt id too, for revisions that predate structured content.
pub(crate) fn reply(receipt: Option<&str>, ok: bool, fields: Map<String, Value>) -> CallToolResult {
    let mut structured = Map::new();
    structured.insert("ok".into(), json!(ok));
    structured.insert("receipt".into(), json!(receipt));
    structured.extend(fields);
    let text = model_text(&structured);
    let meta = receipt
        .map(|id| rmcp::model::MetaObject(Map::from_iter([("receipt".to_string(), json!(id))])));
    let structured = Value::Object(structured);
    let mut result = if ok {
        CallToolResult::structured(structured)
    } else {
        CallToolResult::structured_error(structured)
    };
    result.content = vec![ContentBlock::text(text)];
    result.with_meta(meta)
}

/// The model's view of a structured reply: without the receipt id, and without `ok` when true.
fn model_text(structured: &Map<String, Value>) -> String {
    let mut shown = structured.clone();
    shown.remove("receipt");
    if shown.get("ok") == Some(&Value::Bool(true)) {
        shown.remove("ok");
    }
    Value::Object(shown).to_string()
}

/// An error whose receipt could not be written: no receipt id is handed out for rows that do
/// not exist.
pub(crate) fn unreceipted_error(error: &ToolError) -> CallToolResult {
    reply(None, false, error_fields(error))
}

pub(crate) fn error_result(call_id: &str, error: &ToolError) -> CallToolResult {
    reply(Some(call_id), false, error_fields(error))
}

fn error_fields(error: &ToolError) -> Map<String, Value> {
    Map::from_iter([("error".to_string(), json!(error))])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_surface_error_stays_whole_and_other_failures_are_named() {
        let own = ToolError::new(ErrorCode::NoMatch, "no such element")
            .at("args.selector")
            .valid(["button", "textInput"]);
        let (error, refused) = failure_error(SurfaceError::Tool(own.clone()));
        assert_eq!(error, own, "code, path and valid choices kept");
        assert!(!refused);
        let (error, refused) = failure_error(SurfaceError::Refused {
            message: "it targets an approver".into(),
        });
        assert_eq!(error.code, ErrorCode::Denied);
        assert!(refused);
        let (error, _) = failure_error(SurfaceError::Failed {
            message: "boom".into(),
        });
        assert_eq!(error.code, ErrorCode::ActionFailed);
        assert!(error.message.contains("boom"), "{error:?}");
    }
}
