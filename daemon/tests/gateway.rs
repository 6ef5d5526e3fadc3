//! The gateway's invariant, in process and without any desktop: every call, whatever way it
//! ends, leaves exactly one intent and one result receipt, and the id it hands back names them.
//! A fake surface stands in for the real ones; it proves the pipeline, not a surface.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use computer_daemon::call::cancel::CallCancel;
use computer_daemon::call::gateway::Gateway;
use computer_daemon::guard::approval::Approvals;
use computer_daemon::guard::policy::{Caller, Decision, Policy, PolicyInput};
use computer_daemon::guard::ratelimit::RateLimiter;
use computer_daemon::record::receipts::{self, Ledger, ListFilter};
use computer_ipc::{Complications, SurfaceName, TOOL_NAME, ToolError};
use computer_surfaces::{
    ActionFacts, Availability, CallContext, CommandSpec, NoArgs, Outcome, PreparedAction, Registry,
    Risk, Surface, SurfaceError,
};
use rmcp::model::CallToolResult;
use serde_json::{Map, Value, json};

/// Commands of the fake surface, one per way an action can end.
const COMMANDS: &[CommandSpec] = &[
    CommandSpec::of::<NoArgs>("ok", Risk::Observe),
    CommandSpec::of::<NoArgs>("fail", Risk::Observe),
    CommandSpec::of::<NoArgs>("refuse", Risk::Observe),
    CommandSpec::of::<NoArgs>("slow", Risk::Observe),
    CommandSpec::of::<NoArgs>("bad", Risk::Observe),
    CommandSpec::of::<NoArgs>("deny", Risk::Observe),
    CommandSpec::of::<NoArgs>("ask", Risk::Act),
    CommandSpec::of::<NoArgs>("unsent", Risk::Act),
    CommandSpec::of::<NoArgs>("look", Risk::Observe),
];

/// The commands whose action was asked to look before it ran, by any test.
static LOOKED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

struct Fake;

struct FakeAction(String, bool);

#[async_trait]
impl PreparedAction for FakeAction {
    fn risk(&self) -> Risk {
        if self.0 == "ask" {
            Risk::Act
        } else {
            Risk::Observe
        }
    }
    fn describe(&self) -> String {
        format!("fake {}", self.0)
    }
    fn facts(&self) -> ActionFacts {
        ActionFacts::default()
    }
    async fn look_before(&mut self) {
        LOOKED.lock().unwrap().push(self.0.clone());
        self.1 = true;
    }
    async fn run(self: Box<Self>, ctx: CallContext) -> Result<Outcome, SurfaceError> {
        match self.0.as_str() {
            "look" if !self.1 => Err(SurfaceError::Failed {
                message: "ran without having looked".into(),
            }),
            "fail" => Err(SurfaceError::Failed {
                message: "it broke".into(),
            }),
            "refuse" => Err(SurfaceError::Refused {
                message: "an approver's window".into(),
            }),
            "unsent" => Err(SurfaceError::NothingSent {
                message: "the keys' window changed; nothing was sent".into(),
            }),
            "slow" => {
                ctx.cancel.cancelled().await;
                Ok(Outcome::default())
            }
            _ => Ok(Outcome {
                success: true,
                ..Outcome::default()
            }),
        }
    }
}

#[async_trait]
impl Surface for Fake {
    fn name(&self) -> SurfaceName {
        SurfaceName::Shell
    }
    fn backend(&self) -> &'static str {
        "fake"
    }
    fn commands(&self) -> &'static [CommandSpec] {
        COMMANDS
    }
    fn probe(&self) -> Availability {
        Availability::Ready
    }
    fn result_fields(&self, command: &str) -> &'static [&'static str] {
        // The commands named as acts read back their effect; `ok` and `bad` do not.
        match command {
            "ok" | "bad" | "slow" => &["value"],
            _ => &["value", "effect", "effect_evidence"],
        }
    }
    fn prepare(
        &self,
        command: &str,
        _args: &Map<String, Value>,
        _complications: &Complications,
    ) -> Result<Box<dyn PreparedAction>, ToolError> {
        if command == "bad" || !COMMANDS.iter().any(|c| c.name == command) {
            return Err(ToolError::invalid("not a fake command").at("command"));
        }
        Ok(Box::new(FakeAction(command.to_string(), false)))
    }
}

/// Denies `deny`, asks for acts, allows the rest.
struct FakePolicy;

impl Policy for FakePolicy {
    fn decide(&self, input: &PolicyInput<'_>) -> Decision {
        match (input.command, input.risk) {
            ("deny", _) => Decision::Deny {
                rule: "test".into(),
                reason: "denied by test".into(),
            },
            ("unsent", _) => Decision::Allow {
                rule: "test".into(),
            },
            (_, Risk::Act) => Decision::ask("test"),
            _ => Decision::Allow {
                rule: "test".into(),
            },
        }
    }
}

fn caller(surfaces: Option<Vec<SurfaceName>>) -> Caller {
    Caller {
        uid: 0,
        pid: Some(1),
        agent: "test".into(),
        surfaces,
        observe_only: false,
    }
}

async fn gateway(dir: &std::path::Path, calls_allowed: u32) -> Arc<Gateway> {
    let ledger = Ledger::open(&dir.join("receipts.sqlite"))
        .await
        .expect("ledger");
    let artifacts = dir.join("artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    Gateway::new(
        Registry::from_surfaces(vec![Arc::new(Fake)]),
        Arc::new(FakePolicy),
        // Nobody answers: an asked call is denied after 50 ms.
        Arc::new(Approvals::new(
            Duration::from_millis(50),
            Duration::from_secs(60),
            Duration::from_secs(60),
        )),
        RateLimiter::new(calls_allowed, Duration::from_secs(3600)),
        ledger,
        artifacts,
    )
}

async fn call(
    gateway: &Gateway,
    caller: &Caller,
    tool: &str,
    args: Value,
    cancel: CallCancel,
) -> Value {
    let arguments = match args {
        Value::Object(map) => Some(map),
        _ => None,
    };
    let result: CallToolResult = gateway
        .handle(caller, tool, arguments, cancel, &|_| {})
        .await;
    result.structured_content.expect("structured content")
}

/// The receipt rows of one call, by kind.
fn rows_of(dir: &std::path::Path, call_id: &str) -> Vec<String> {
    let path = dir.join("receipts.sqlite");
    let conn = receipts::open_ro(&path).expect("open ledger");
    let filter = ListFilter {
        call_id: Some(call_id.to_string()),
        ..ListFilter::default()
    };
    let mut kinds: Vec<String> = receipts::list(&conn, &path, &filter)
        .expect("list")
        .into_iter()
        .map(|r| r.kind)
        .collect();
    kinds.sort();
    kinds
}

#[tokio::test(flavor = "multi_thread")]
async fn every_exit_leaves_an_intent_and_a_result() {
    let dir = tempfile::tempdir().unwrap();
    let gateway = gateway(dir.path(), 0).await;
    let anyone = caller(None);
    let shell = |command: &str| json!({"surface": "shell", "command": command});
    let cancelled_request = || {
        let cancel = CallCancel::default();
        cancel.request.cancel();
        cancel
    };
    let cases: Vec<(&str, Caller, &str, Value, CallCancel, &str)> = vec![
        (
            "success",
            anyone.clone(),
            TOOL_NAME,
            shell("ok"),
            CallCancel::default(),
            "",
        ),
        (
            "unknown tool",
            anyone.clone(),
            "OTHER",
            shell("ok"),
            CallCancel::default(),
            "invalid_call",
        ),
        (
            "undecodable",
            anyone.clone(),
            TOOL_NAME,
            json!({"surface": "shell", "command": "ok", "bogus": 1}),
            CallCancel::default(),
            "invalid_call",
        ),
        (
            "unknown surface",
            anyone.clone(),
            TOOL_NAME,
            json!({"surface": "shel", "command": "ok"}),
            CallCancel::default(),
            "invalid_call",
        ),
        (
            "outside the scope",
            caller(Some(vec![SurfaceName::Gui])),
            TOOL_NAME,
            shell("ok"),
            CallCancel::default(),
            "denied",
        ),
        (
            "surface not built",
            anyone.clone(),
            TOOL_NAME,
            json!({"surface": "keychain", "command": "list"}),
            CallCancel::default(),
            "unavailable",
        ),
        (
            "unsupported complication",
            anyone.clone(),
            TOOL_NAME,
            json!({"surface": "shell", "command": "ok", "complications": {"detach": true}}),
            CallCancel::default(),
            "unavailable",
        ),
        (
            "bad return budget",
            anyone.clone(),
            TOOL_NAME,
            json!({"surface": "shell", "command": "ok", "complications": {"return": {"select": ["nope"]}}}),
            CallCancel::default(),
            "invalid_call",
        ),
        (
            "invalid args",
            anyone.clone(),
            TOOL_NAME,
            shell("bad"),
            CallCancel::default(),
            "invalid_call",
        ),
        (
            "denied",
            anyone.clone(),
            TOOL_NAME,
            shell("deny"),
            CallCancel::default(),
            "denied",
        ),
        (
            "not approved",
            anyone.clone(),
            TOOL_NAME,
            shell("ask"),
            CallCancel::default(),
            "denied",
        ),
        (
            "action failed",
            anyone.clone(),
            TOOL_NAME,
            shell("fail"),
            CallCancel::default(),
            "action_failed",
        ),
        (
            "refused at the target",
            anyone.clone(),
            TOOL_NAME,
            shell("refuse"),
            CallCancel::default(),
            "denied",
        ),
        (
            "cancelled before it ran",
            anyone.clone(),
            TOOL_NAME,
            shell("ok"),
            cancelled_request(),
            "cancelled",
        ),
        // The `job` command (jobs.rs), served by the daemon: receipted like any call.
        (
            "job list",
            anyone.clone(),
            TOOL_NAME,
            json!({"surface": "shell", "command": "job", "args": {"op": "list"}}),
            CallCancel::default(),
            "",
        ),
        (
            "job of an unknown id",
            anyone.clone(),
            TOOL_NAME,
            json!({"surface": "shell", "command": "job", "args": {"op": "status", "id": "nope"}}),
            CallCancel::default(),
            "invalid_call",
        ),
        (
            "job with bad args",
            anyone.clone(),
            TOOL_NAME,
            json!({"surface": "shell", "command": "job", "args": {"op": "peek"}}),
            CallCancel::default(),
            "invalid_call",
        ),
    ];
    for (what, who, tool, args, cancel, code) in cases {
        let reply = call(&gateway, &who, tool, args, cancel).await;
        let receipt = reply["receipt"]
            .as_str()
            .unwrap_or_else(|| panic!("{what}: no receipt: {reply}"));
        if code.is_empty() {
            assert_eq!(reply["ok"], true, "{what}: {reply}");
        } else {
            assert_eq!(reply["error"]["code"], code, "{what}: {reply}");
        }
        // A call asked for approval has its intent written before anyone is asked, and again
        // with the answer.
        let rows: &[&str] = if what == "not approved" {
            &["intent", "intent", "result"]
        } else {
            &["intent", "result"]
        };
        assert_eq!(rows_of(dir.path(), receipt), rows, "{what}: {reply}");
    }

    // Cancelled while it runs: the action sees the cancellation, the result says who.
    let cancel = CallCancel::default();
    let connection = cancel.connection.clone();
    let running = {
        let gateway = gateway.clone();
        let anyone = anyone.clone();
        tokio::spawn(async move { call(&gateway, &anyone, TOOL_NAME, shell("slow"), cancel).await })
    };
    connection.cancel();
    let reply = running.await.unwrap();
    let receipt = reply["receipt"].as_str().unwrap().to_string();
    assert_eq!(rows_of(dir.path(), &receipt), ["intent", "result"]);
    let path = dir.path().join("receipts.sqlite");
    let conn = receipts::open_ro(&path).unwrap();
    let filter = ListFilter {
        call_id: Some(receipt.clone()),
        ..ListFilter::default()
    };
    let result = receipts::list(&conn, &path, &filter)
        .unwrap()
        .into_iter()
        .find(|r| r.kind == "result")
        .unwrap();
    assert_eq!(
        result.body["cancelled"]["by"], "disconnect",
        "{:?}",
        result.body
    );

    // Shutting down: refused, and receipted all the same.
    gateway.close();
    let reply = call(
        &gateway,
        &anyone,
        TOOL_NAME,
        shell("ok"),
        CallCancel::default(),
    )
    .await;
    assert_eq!(reply["error"]["code"], "shutting_down", "{reply}");
    assert_eq!(
        rows_of(dir.path(), reply["receipt"].as_str().unwrap()),
        ["intent", "result"]
    );
}

/// An act that reads back its effect and ends before anything was sent says `effect:
/// "refused"` in its reply and its result row, whichever way it was refused; a failure after
/// it acted, a call refused before any surface saw it and a command without effects do not.
#[tokio::test(flavor = "multi_thread")]
async fn an_act_refused_before_anything_was_sent_says_so_in_reply_and_receipt() {
    let dir = tempfile::tempdir().unwrap();
    let gateway = gateway(dir.path(), 0).await;
    let anyone = caller(None);
    let path = dir.path().join("receipts.sqlite");
    let result_of = |receipt: &str| {
        let conn = receipts::open_ro(&path).unwrap();
        let filter = ListFilter {
            call_id: Some(receipt.to_string()),
            ..ListFilter::default()
        };
        receipts::list(&conn, &path, &filter)
            .unwrap()
            .into_iter()
            .find(|r| r.kind == "result")
            .unwrap()
            .body
    };
    for (command, refused) in [
        ("deny", true),
        ("ask", true),
        ("refuse", true),
        ("unsent", true),
        ("fail", false),
        ("bad", false),
        ("ok", false),
    ] {
        let reply = call(
            &gateway,
            &anyone,
            TOOL_NAME,
            json!({"surface": "shell", "command": command}),
            CallCancel::default(),
        )
        .await;
        let body = result_of(reply["receipt"].as_str().unwrap());
        if refused {
            assert_eq!(reply["effect"], "refused", "{command}: {reply}");
            assert_eq!(body["effect"], "refused", "{command}: {body}");
        } else {
            assert!(reply.get("effect").is_none(), "{command}: {reply}");
            assert!(body.get("effect").is_none(), "{command}: {body}");
        }
    }
}

/// The same acts as steps of one call: a step's result in the reply says `effect: "refused"` as
/// the call alone would. (A step a person must approve is asked for with the call's others, so
/// its refusal refuses the whole call, whose error says nothing ran.)
#[tokio::test(flavor = "multi_thread")]
async fn a_step_refused_before_anything_was_sent_says_so_in_its_result() {
    let dir = tempfile::tempdir().unwrap();
    let gateway = gateway(dir.path(), 0).await;
    let anyone = caller(None);
    for (command, refused) in [
        ("deny", true),
        ("refuse", true),
        ("unsent", true),
        ("fail", false),
        ("bad", false),
    ] {
        let reply = call(
            &gateway,
            &anyone,
            TOOL_NAME,
            json!({
                "steps": [
                    {"surface": "shell", "command": "ok"},
                    {"surface": "shell", "command": command},
                ],
                "stop_on_error": false,
            }),
            CallCancel::default(),
        )
        .await;
        // The reply lists the steps that failed, with what each said.
        let failed = reply["failed"]
            .as_array()
            .unwrap_or_else(|| panic!("{command}: no failed steps: {reply}"));
        assert_eq!(failed.len(), 1, "{command}: {reply}");
        assert_eq!(failed[0]["step"], 2, "{command}: {reply}");
        if refused {
            assert_eq!(failed[0]["effect"], "refused", "{command}: {reply}");
        } else {
            assert!(failed[0].get("effect").is_none(), "{command}: {reply}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_rate_limited_call_is_receipted_too() {
    let dir = tempfile::tempdir().unwrap();
    let gateway = gateway(dir.path(), 1).await;
    let anyone = caller(None);
    let shell = json!({"surface": "shell", "command": "ok"});
    let first = call(
        &gateway,
        &anyone,
        TOOL_NAME,
        shell.clone(),
        CallCancel::default(),
    )
    .await;
    assert_eq!(first["ok"], true, "{first}");
    let second = call(&gateway, &anyone, TOOL_NAME, shell, CallCancel::default()).await;
    assert_eq!(second["error"]["code"], "rate_limited", "{second}");
    assert_eq!(
        rows_of(dir.path(), second["receipt"].as_str().unwrap()),
        ["intent", "result"]
    );
}

/// Every row of a programmatic call names the run it came from.
fn rows_via(dir: &std::path::Path, call_id: &str) -> Vec<Value> {
    let path = dir.join("receipts.sqlite");
    let conn = receipts::open_ro(&path).expect("open ledger");
    let filter = ListFilter {
        call_id: Some(call_id.to_string()),
        ..ListFilter::default()
    };
    receipts::list(&conn, &path, &filter)
        .expect("list")
        .into_iter()
        .map(|r| r.body["via"].clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_call_from_a_run_goes_through_the_same_stages_within_what_the_run_may_call() {
    let dir = tempfile::tempdir().unwrap();
    let gateway = gateway(dir.path(), 0).await;
    let agent = caller(None);
    let run = "0190aaaa-0000-7000-8000-000000000001";
    let callable: Vec<String> = ["shell.ok", "shell.ask", "shell.deny", "shell.fail"]
        .map(String::from)
        .to_vec();
    let via = |command: &str| {
        let arguments = json!({"surface": "shell", "command": command});
        let gateway = gateway.clone();
        let agent = agent.clone();
        let callable = callable.clone();
        async move {
            gateway
                .handle_via(
                    &agent,
                    run,
                    &callable,
                    arguments.as_object().cloned(),
                    CallCancel::default(),
                )
                .await
                .structured_content
                .expect("structured content")
        }
    };

    let ok = via("ok").await;
    assert_eq!(ok["ok"], true, "{ok}");
    // Outside what the run was given: refused, naming what it may call.
    let outside = via("slow").await;
    assert_eq!(outside["error"]["code"], "denied", "{outside}");
    assert_eq!(outside["error"]["path"], "command");
    assert_eq!(outside["error"]["valid"], json!(callable));
    // What policy would ask a person for is refused at once: nobody is asked for a run.
    let started = std::time::Instant::now();
    let asked = via("ask").await;
    assert_eq!(asked["error"]["code"], "denied", "{asked}");
    let message = asked["error"]["message"].as_str().unwrap();
    assert!(message.contains("nobody is asked"), "{message}");
    assert!(started.elapsed() < Duration::from_millis(50), "it waited");
    // Denied and failing calls read as they do from any caller.
    let denied = via("deny").await;
    assert_eq!(denied["error"]["message"], "denied by test", "{denied}");
    let failed = via("fail").await;
    assert_eq!(failed["error"]["code"], "action_failed", "{failed}");

    for reply in [&ok, &outside, &asked, &denied, &failed] {
        let receipt = reply["receipt"].as_str().expect("receipted");
        assert_eq!(rows_of(dir.path(), receipt), ["intent", "result"]);
        assert_eq!(rows_via(dir.path(), receipt), [json!(run), json!(run)]);
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_action_looks_before_it_runs_and_a_denied_one_never_looks() {
    let dir = tempfile::tempdir().unwrap();
    let gateway = gateway(dir.path(), 0).await;
    let anyone = caller(None);
    let shell = |command: &str| json!({"surface": "shell", "command": command});
    let looked = call(
        &gateway,
        &anyone,
        TOOL_NAME,
        shell("look"),
        CallCancel::default(),
    )
    .await;
    assert_eq!(
        looked["ok"], true,
        "the action ran without looking: {looked}"
    );
    let denied = call(
        &gateway,
        &anyone,
        TOOL_NAME,
        shell("deny"),
        CallCancel::default(),
    )
    .await;
    assert_eq!(denied["ok"], false, "{denied}");
    let seen = LOOKED.lock().unwrap().clone();
    assert!(seen.iter().any(|c| c == "look"), "{seen:?}");
    // Policy refused it: nothing of it may touch the desktop, not even a read.
    assert!(!seen.iter().any(|c| c == "deny"), "{seen:?}");
}
