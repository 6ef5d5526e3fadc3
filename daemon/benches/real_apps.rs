//! Benchmarks in real applications against same-run anchors: `ax tree` of LibreOffice Writer
//! showing a generated document (about 2,000 accessible nodes) against a Python libatspi walk of
//! the same app that reads the same nodes by the same children rule; `ax find` of a button by
//! name in a local web page in Chromium against the Python client finding it; and calls and
//! model-visible bytes per real-app task (a web form in Chromium, a formula in Calc, two
//! paragraphs in Writer, 7×6 on gnome-calculator) against one screenshot per step. Starts its own
//! headless desktop (Xvfb, session bus, AT-SPI) and the apps with fresh profiles, through the
//! real-apps suite's launchers (`computer_tests::apps`).
//! Run: `cargo bench -p computer-daemon --bench real_apps`.

mod common;

// The apps, their launchers and the Python anchor (libatspi) are Linux's: the bench runs there.
#[cfg(target_os = "linux")]
mod linux {
    use std::path::Path;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use computer_tests::apps::{self, Launch, MemoryBound, RealApp, WebServer};
    use computer_tests::desktop::{Desktop, TestDesktop, gi_python};
    use computer_tests::{Daemon, try_wait_for};
    use rmcp::model::CallToolResult;
    use serde_json::{Value, json};

    use crate::common::{load_average, median, visible_bytes};

    /// Timed runs of each daemon call; the Python anchor, slower, runs fewer times.
    const RUNS: usize = 9;
    const PYTHON_RUNS: usize = 5;
    /// A reply this large holds Writer's whole outline (about 110 KB).
    const MAX_BYTES: u64 = 1 << 20;

    /// The anchor: a libatspi client (python3-gi, gir1.2-atspi-2.0) that reads what `ax tree`
    /// reads of every node (role, name, states, children) and takes an object's children by the
    /// same rule as `surfaces/src/accessibility/atspi/children.rs`: all of them when it reports
    /// 0..=1000 and does not manage its descendants; of one that manages them, at most 200 by
    /// index; of one reporting more than 1000 (or a negative count), 32 by index; in both paged
    /// cases also its selected children, at most 32. Modes:
    /// `walk PID` -> {nodes, ms}; `find PID ROLE NAME` -> {found, visited, ms} (stops at the
    /// first match); `texts PID` -> {texts: [[role, name, text]]} of the nodes with a text.
    const PY_CLIENT: &str = r#"
import json, sys, time, warnings
warnings.filterwarnings("ignore")
import gi
gi.require_version("Atspi", "2.0")
from gi.repository import Atspi, GLib

WHOLE_LIST_LIMIT, MANAGED_PAGE, HUGE_PAGE, SELECTED_LIMIT = 1000, 200, 32, 32
# A loaded 2-core machine may take longer than libatspi's default 800 ms for one call.
Atspi.set_timeout(10000, 15000)

def find_app(pid):
    desktop = Atspi.get_desktop(0)
    for i in range(desktop.get_child_count()):
        app = desktop.get_child_at_index(i)
        try:
            if app is not None and app.get_process_id() == pid:
                return app
        except GLib.Error:
            continue
    sys.exit(json.dumps({"error": "pid %d is not on AT-SPI" % pid}))

def children(node, states):
    count = node.get_child_count()
    manages = states.contains(Atspi.StateType.MANAGES_DESCENDANTS)
    if 0 <= count <= WHOLE_LIST_LIMIT and not manages:
        return [node.get_child_at_index(i) for i in range(count)]
    page = min(count, MANAGED_PAGE) if 0 <= count <= WHOLE_LIST_LIMIT else HUGE_PAGE
    kids = [node.get_child_at_index(i) for i in range(page)]
    selection = node.get_selection_iface()
    if selection is not None:
        try:
            for i in range(max(0, min(selection.get_n_selected_children(), SELECTED_LIMIT))):
                child = selection.get_selected_child(i)
                if child is not None and child not in kids:
                    kids.append(child)
        except GLib.Error:
            pass
    return kids

def walk(root, visit):
    """Preorder; visit(node, role, name) returning True stops the walk. Nodes read."""
    stack, count = [root], 0
    while stack:
        node = stack.pop()
        try:
            role = node.get_role_name()
            name = node.get_name()
            states = node.get_state_set()
            states.get_states()
        except GLib.Error:
            continue
        count += 1
        if visit(node, role, name):
            break
        for child in reversed(children(node, states)):
            if child is not None:
                stack.append(child)
    return count

mode, app = sys.argv[1], find_app(int(sys.argv[2]))
started = time.perf_counter()
if mode == "walk":
    nodes = walk(app, lambda node, role, name: False)
    print(json.dumps({"nodes": nodes, "ms": (time.perf_counter() - started) * 1000}))
elif mode == "find":
    want_role, want_name = sys.argv[3], sys.argv[4]
    hit = []
    visited = walk(app, lambda node, role, name: hit.append(1) or True
                   if role == want_role and name == want_name else False)
    print(json.dumps({"found": bool(hit), "visited": visited,
                      "ms": (time.perf_counter() - started) * 1000}))
else:
    texts = []
    def read(node, role, name):
        text = node.get_text_iface()
        if text is not None:
            value = Atspi.Text.get_text(text, 0, -1)
            if value:
                texts.append([role, name, value])
        return False
    walk(app, read)
    print(json.dumps({"texts": texts}))
"#;

    fn python(desktop: &Desktop, args: &[&str]) -> Value {
        let out = desktop
            .command(&gi_python())
            .arg("-c")
            .arg(PY_CLIENT)
            .args(args)
            .output()
            .expect("python3 (python3-gi, gir1.2-atspi-2.0)");
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
            panic!(
                "the Python AT-SPI client {args:?}: stdout {:?} stderr {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }

    /// The daemon's calls, made from this synchronous bench on a runtime of its own (the
    /// launchers block on runtimes of theirs, which may not nest in an async main).
    struct Caller {
        runtime: tokio::runtime::Runtime,
        daemon: Daemon,
    }

    impl Caller {
        /// One call on a fresh connection; its result.
        fn call(&self, call: Value) -> CallToolResult {
            self.runtime.block_on(async {
                let client = self.daemon.client().await;
                let result = client.call_raw(call).await.expect("call");
                client.close().await;
                result
            })
        }

        /// One call's structured content.
        fn structured(&self, surface: &str, command: &str, args: Value) -> Value {
            let result = self.call(json!({"surface": surface, "command": command, "args": args}));
            computer_tests::structured(&result)
        }

        /// Wall time (ms) of `call` over a connection opened beforehand (the connect is not
        /// the surface), and its structured content.
        fn timed(&self, call: Value) -> (f64, Value) {
            self.runtime.block_on(async {
                let client = self.daemon.client().await;
                let started = Instant::now();
                let result = client.call_raw(call).await.expect("call");
                let ms = started.elapsed().as_secs_f64() * 1000.0;
                client.close().await;
                (ms, computer_tests::structured(&result))
            })
        }

        /// The steps of a task, one call per step on one connection, each built from the
        /// replies before it (the bench's stand-in for the model reading a window id or pid
        /// out of an earlier reply): the calls, their model-visible bytes, the replies. The
        /// last step is made again, and counted, while its reply does not satisfy `answered`
        /// (the agent reads the display again when the result has not shown yet), after a
        /// pause standing for the model's round, at most 20 times.
        fn task(&self, steps: &[Step], answered: fn(&Value) -> bool) -> (usize, usize, Vec<Value>) {
            self.runtime.block_on(async {
                let client = self.daemon.client().await;
                let (mut bytes, mut replies) = (0, Vec::new());
                for step in steps {
                    let result = client.call_raw(step(&replies)).await.expect("call");
                    bytes += visible_bytes(&result);
                    replies.push(computer_tests::structured(&result));
                }
                let last = steps.last().expect("a task has steps");
                for _ in 0..20 {
                    if answered(replies.last().unwrap()) {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(250)).await;
                    let result = client.call_raw(last(&replies)).await.expect("call");
                    bytes += visible_bytes(&result);
                    replies.push(computer_tests::structured(&result));
                }
                client.close().await;
                (replies.len(), bytes, replies)
            })
        }
    }

    type Step = Box<dyn Fn(&[Value]) -> Value>;

    fn call(surface: &str, command: &str, args: Value) -> Value {
        json!({"surface": surface, "command": command, "args": args})
    }

    fn fixed(surface: &'static str, command: &'static str, args: Value) -> Step {
        Box::new(move |_| call(surface, command, args.clone()))
    }

    /// `(window id, pid)` of the window of `app` in a `gui windows` reply.
    fn window_of(windows: &Value, app: &RealApp) -> (u64, u64) {
        let processes = app.processes();
        windows["windows"]
            .as_array()
            .and_then(|all| {
                all.iter().find_map(|w| {
                    let pid = w["pid"].as_u64()?;
                    processes
                        .contains(&(pid as u32))
                        .then(|| (w["id"].as_u64().unwrap(), pid))
                })
            })
            .unwrap_or_else(|| panic!("no window of {} in {windows}", app.name))
    }

    /// A `gui windows` step, then `gui focus` on `app`'s window from its reply.
    fn find_and_focus(app: Arc<RealApp>) -> [Step; 2] {
        [
            fixed("gui", "windows", json!({})),
            Box::new(move |replies| {
                let (id, _) = window_of(&replies[0], &app);
                call("gui", "focus", json!({"window": id}))
            }),
        ]
    }

    /// An `ax` step aimed at the app whose window the task's first reply (`gui windows`) shows.
    fn ax_in(app: Arc<RealApp>, command: &'static str, args: Value) -> Step {
        Box::new(move |replies| {
            let (_, pid) = window_of(&replies[0], &app);
            let mut args = args.clone();
            args["app"] = json!(pid);
            call("ax", command, args)
        })
    }

    /// Focuses the browser's window and opens `url` through its address bar (set-up, not
    /// counted).
    fn open_url(caller: &Caller, browser: &RealApp, url: &str) {
        let window = apps::wait_window(&caller.daemon, browser, "", Duration::from_secs(60));
        for (command, args) in [
            ("focus", json!({"window": window["id"]})),
            ("key", json!({"combo": "ctrl+l"})),
            ("type", json!({"text": format!("{url}\n")})),
        ] {
            let reply = caller.structured("gui", command, args);
            assert_eq!(reply["ok"], true, "gui {command} opening {url}: {reply}");
        }
    }

    /// Polls `ax find` until `selector` matches in `app` (set-up, not counted).
    fn wait_found(caller: &Caller, app: &RealApp, selector: &str) {
        let mut last = Value::Null;
        let found = try_wait_for(Duration::from_secs(60), || {
            last = caller.structured(
                "ax",
                "find",
                json!({"app": app.pid(), "selector": selector}),
            );
            (last["total"].as_u64().unwrap_or(0) > 0).then_some(())
        });
        assert!(
            found.is_some(),
            "{selector} never matched in {}: {last}",
            app.name
        );
    }

    /// A flat OpenDocument text: a heading, an 8×4 table and 300 paragraphs. Writer makes
    /// accessibles for what shows only, so the tree is its UI (about 1,900 nodes, most of them
    /// menu items) and the first page of the document.
    fn writer_document(dir: &Path) -> std::path::PathBuf {
        let rows: String = (0..8)
            .map(|r| {
                let cells: String = (0..4)
                    .map(|c| {
                        format!(
                            "<table:table-cell office:value-type=\"string\"><text:p>row {r} column {c}</text:p></table:table-cell>"
                        )
                    })
                    .collect();
                format!("<table:table-row>{cells}</table:table-row>\n")
            })
            .collect();
        let paragraphs: String = (0..300)
            .map(|i| {
                format!(
                    "<text:p>Paragraph {i}: the quick brown fox jumps over the lazy dog, a line of filler text.</text:p>\n"
                )
            })
            .collect();
        let document = format!(
            r#"<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" office:version="1.3" office:mimetype="application/vnd.oasis.opendocument.text">
<office:body><office:text>
<text:h text:outline-level="1">Benchmark document</text:h>
<table:table table:name="Prices"><table:table-column table:number-columns-repeated="4"/>
{rows}</table:table>
{paragraphs}</office:text></office:body></office:document>
"#
        );
        let path = dir.join("bench.fodt");
        std::fs::write(&path, document).expect("write the document");
        path
    }

    /// Writer opening `document`, launched as `apps::libreoffice` launches it (the GTK3 plugin,
    /// whose accessibles are on AT-SPI; a fresh user installation), with a file to open.
    fn writer_with(document: &Path) -> Arc<RealApp> {
        let dir = tempfile::Builder::new()
            .prefix("real-apps-bench-writer-")
            .tempdir()
            .expect("tempdir");
        let user = dir.path().join("user");
        apps::launch(
            Launch {
                name: "libreoffice-bench-document",
                program: "soffice",
                args: vec![
                    format!("-env:UserInstallation=file://{}", user.display()),
                    "--norestore".into(),
                    "--nologo".into(),
                    "--writer".into(),
                    document.display().to_string(),
                ],
                env: vec![("SAL_USE_VCLPLUGIN".into(), "gtk3".into())],
                bound: MemoryBound::LARGE,
                dir,
            },
            Duration::from_secs(120),
        )
    }

    /// A local page of a few hundred elements (links, a table, labelled fields, buttons) whose
    /// last element is the button looked for.
    fn web_page(dir: &Path) -> std::path::PathBuf {
        let links: String = (0..60)
            .map(|i| format!("<li><a href=\"#s{i}\">Section {i}</a></li>"))
            .collect();
        let rows: String = (0..30)
            .map(|r| {
                let cells: String = (0..5).map(|c| format!("<td>r{r} c{c}</td>")).collect();
                format!("<tr>{cells}</tr>\n")
            })
            .collect();
        let fields: String = (0..40)
            .map(|i| {
                format!(
                    "<p><label for=\"f{i}\">Field {i}</label> <input id=\"f{i}\" type=\"text\"></p>\n"
                )
            })
            .collect();
        let buttons: String = (0..40)
            .map(|i| format!("<button type=\"button\">Action {i}</button>"))
            .collect();
        let page = format!(
            r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Bench page</title></head><body>
<h1>Bench page</h1><nav><ul>{links}</ul></nav>
<table border="1"><caption>Rows</caption><tbody>
{rows}</tbody></table>
<form>{fields}<div>{buttons}</div><p><button type="submit">Place order</button></p></form>
</body></html>
"#
        );
        let path = dir.join("bench-page.html");
        std::fs::write(&path, page).expect("write the page");
        path
    }

    /// One row of the tasks table.
    struct TaskRow {
        name: String,
        calls: usize,
        bytes: usize,
        screenshot_b64: usize,
    }

    /// The PNG of a default `gui screenshot` of the desktop as it is, base64-encoded.
    fn screenshot_b64(caller: &Caller) -> usize {
        let shot = caller.structured("gui", "screenshot", json!({}));
        let png = shot["bytes"]
            .as_u64()
            .unwrap_or_else(|| panic!("gui screenshot: {shot}")) as usize;
        png.div_ceil(3) * 4
    }

    fn texts(desktop: &Desktop, app: &RealApp) -> Vec<(String, String, String)> {
        let out = python(desktop, &["texts", &app.pid().to_string()]);
        out["texts"]
            .as_array()
            .unwrap_or_else(|| panic!("texts of {}: {out}", app.name))
            .iter()
            .map(|t| {
                (
                    t[0].as_str().unwrap().to_string(),
                    t[1].as_str().unwrap().to_string(),
                    t[2].as_str().unwrap().to_string(),
                )
            })
            .collect()
    }

    fn effects(replies: &[Value]) -> String {
        replies
            .iter()
            .filter_map(|r| r["effect"].as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn main() {
        // The daemon under test is the binary cargo built for this bench.
        // SAFETY: set before any thread of ours reads the environment.
        unsafe { std::env::set_var("COMPUTER_BIN", env!("CARGO_BIN_EXE_computer")) };
        let load_before = load_average();
        let desktop = Desktop::shared();
        let caller = Caller {
            runtime: tokio::runtime::Runtime::new().expect("runtime"),
            daemon: Daemon::start_on_desktop(""),
        };
        let scratch = tempfile::tempdir().expect("tempdir");

        // 1. `ax tree` of Writer showing a large document, against the Python walk.
        let document = writer_document(scratch.path());
        let writer_doc = writer_with(&document);
        let tree_args = json!({"app": writer_doc.pid(), "max_nodes": 5000});
        let tree_call = json!({"surface": "ax", "command": "tree", "args": tree_args,
                               "complications": {"return": {"max_bytes": MAX_BYTES}}});
        // Wait until the tree has settled (the document lays out after the window shows).
        let mut last = 0;
        let settled = try_wait_for(Duration::from_secs(90), || {
            let (_, out) = caller.timed(tree_call.clone());
            let nodes = out["nodes"].as_u64().unwrap_or(0);
            let stable = nodes > 1000 && nodes == last;
            last = nodes;
            stable.then_some(())
        });
        assert!(
            settled.is_some(),
            "Writer's tree never settled (last {last} nodes)"
        );
        let mut ours = Vec::new();
        let mut nodes = 0;
        for _ in 0..RUNS {
            let (ms, out) = caller.timed(tree_call.clone());
            assert_eq!(out["ok"], true, "{out}");
            assert!(
                out["truncated"].is_null() || out["truncated"] == false,
                "{out}"
            );
            nodes = out["nodes"].as_u64().unwrap();
            ours.push(ms);
        }
        let mut theirs = Vec::new();
        let mut their_nodes = 0;
        for _ in 0..PYTHON_RUNS {
            let out = python(desktop, &["walk", &writer_doc.pid().to_string()]);
            theirs.push(out["ms"].as_f64().unwrap_or_else(|| panic!("{out}")));
            their_nodes = out["nodes"].as_u64().unwrap();
        }
        let (tree_ms, walk_ms) = (median(ours), median(theirs));
        writer_doc.assert_unharmed(desktop);
        writer_doc.kill();

        // 2. `ax find` of a button by name in a local page in Chromium, against Python.
        let page = web_page(scratch.path());
        let chromium = apps::chromium();
        let selector = "button \"Place order\"";
        open_url(&caller, chromium, &format!("file://{}", page.display()));
        wait_found(&caller, chromium, selector);
        let find_call = json!({"surface": "ax", "command": "find",
                               "args": {"app": chromium.pid(), "selector": selector}});
        let mut ours = Vec::new();
        for _ in 0..RUNS {
            let (ms, out) = caller.timed(find_call.clone());
            assert_eq!(out["total"], 1, "{out}");
            ours.push(ms);
        }
        let mut theirs = Vec::new();
        let mut visited = 0;
        for _ in 0..PYTHON_RUNS {
            let out = python(
                desktop,
                &[
                    "find",
                    &chromium.pid().to_string(),
                    "push button",
                    "Place order",
                ],
            );
            assert_eq!(
                out["found"], true,
                "the Python client did not find it: {out}"
            );
            theirs.push(out["ms"].as_f64().unwrap());
            visited = out["visited"].as_u64().unwrap();
        }
        let chromium_nodes = python(desktop, &["walk", &chromium.pid().to_string()])["nodes"]
            .as_u64()
            .unwrap_or(0);
        let (find_ms, their_find_ms) = (median(ours), median(theirs));

        // 3. Calls and model-visible bytes per task, against one screenshot per step.
        let mut rows = Vec::new();
        let server = WebServer::shared();
        open_url(&caller, chromium, &server.url("/form/bench"));
        wait_found(&caller, chromium, "button \"Submit order\"");
        let browser = Arc::clone(chromium);
        let form: Vec<Step> = vec![
            fixed("gui", "windows", json!({})),
            ax_in(
                browser.clone(),
                "act",
                json!({"selector": "textInput \"Full name\"", "action": "focus"}),
            ),
            fixed("gui", "type", json!({"text": "Ada Lovelace"})),
            ax_in(
                browser.clone(),
                "act",
                json!({"selector": "checkBox \"Gift wrap\"", "action": "toggle"}),
            ),
            ax_in(
                browser.clone(),
                "act",
                json!({"selector": "comboBox \"Size\" > * \"Large\"", "action": "select"}),
            ),
            ax_in(
                browser.clone(),
                "act",
                json!({"selector": "button \"Submit order\"", "action": "press"}),
            ),
        ];
        let (calls, bytes, replies) = caller.task(&form, |_| true);
        let posted = try_wait_for(Duration::from_secs(20), || {
            let bodies = server.posted_to("/submit/bench");
            (!bodies.is_empty()).then_some(bodies)
        });
        assert_eq!(
            posted.as_deref(),
            Some(&["name=Ada+Lovelace&gift=yes&size=l".to_string()][..]),
            "the web form task: the server's log; replies {replies:?}"
        );
        eprintln!("web form effects: {}", effects(&replies));
        rows.push(TaskRow {
            name: "fill and submit a web form in Chromium (gui windows; ax act focus; gui type; ax act toggle, select, press)".into(),
            calls,
            bytes,
            screenshot_b64: screenshot_b64(&caller),
        });

        let calc = apps::libreoffice("--calc");
        let mut formula: Vec<Step> = find_and_focus(calc.clone()).into();
        formula.extend([
            fixed("gui", "key", json!({"combo": "ctrl+Home"})),
            fixed("gui", "type", json!({"text": "=6*7"})),
            fixed("gui", "key", json!({"combo": "Return"})),
        ]);
        let (calls, bytes, replies) = caller.task(&formula, |_| true);
        let a1 = try_wait_for(Duration::from_secs(10), || {
            texts(desktop, &calc)
                .into_iter()
                .find(|(_, name, text)| name == "A1" && text == "42")
        });
        assert!(
            a1.is_some(),
            "Calc's A1 does not read 42; replies {replies:?}"
        );
        eprintln!("Calc formula effects: {}", effects(&replies));
        rows.push(TaskRow {
            name: "put a formula in a Calc cell (gui windows, focus; key ctrl+Home; type =6*7; key Return)".into(),
            calls,
            bytes,
            screenshot_b64: screenshot_b64(&caller),
        });
        calc.assert_unharmed(desktop);
        calc.kill();

        let writer = apps::libreoffice("--writer");
        let mut paragraphs: Vec<Step> = find_and_focus(writer.clone()).into();
        paragraphs.push(fixed(
            "gui",
            "type",
            json!({"text": "Hello from the bench.\nA second paragraph."}),
        ));
        let (calls, bytes, replies) = caller.task(&paragraphs, |_| true);
        let landed = try_wait_for(Duration::from_secs(10), || {
            let all = texts(desktop, &writer);
            let has = |want: &str| all.iter().any(|(_, _, text)| text == want);
            (has("Hello from the bench.") && has("A second paragraph.")).then_some(())
        });
        assert!(
            landed.is_some(),
            "Writer does not show the two paragraphs; replies {replies:?}"
        );
        eprintln!("Writer paragraphs effects: {}", effects(&replies));
        rows.push(TaskRow {
            name: "write two paragraphs in Writer (gui windows, focus, type)".into(),
            calls,
            bytes,
            screenshot_b64: screenshot_b64(&caller),
        });
        writer.assert_unharmed(desktop);
        writer.kill();

        let calculator = apps::small_app("gnome-calculator", "gnome-calculator", &[]);
        // The display reads as focused only while its window is the active one.
        let mut multiply: Vec<Step> = find_and_focus(calculator.clone()).into();
        // GTK4 names each button by its label twice ("7 7").
        for button in ["7 7", "× ×", "6 6", "= ="] {
            multiply.push(ax_in(
                calculator.clone(),
                "act",
                json!({"selector": format!("button \"{button}\""), "action": "press"}),
            ));
        }
        multiply.push(ax_in(
            calculator.clone(),
            "read",
            json!({"selector": "[focused]"}),
        ));
        let (calls, bytes, replies) = caller.task(&multiply, |read| {
            read["text"].as_str().map(str::trim) == Some("42")
        });
        let answer = replies.last().unwrap()["text"].as_str().map(str::trim);
        assert_eq!(
            answer,
            Some("42"),
            "the calculator's display; replies {replies:?}"
        );
        assert!(
            texts(desktop, &calculator)
                .iter()
                .any(|(_, _, text)| text.trim() == "42"),
            "no text of the calculator reads 42 through the Python client"
        );
        eprintln!("calculator effects: {}", effects(&replies));
        rows.push(TaskRow {
            name: format!(
                "7×6 on gnome-calculator (gui windows, focus; ax act press ×4; ax read [focused] ×{}: read again until it shows the result)",
                calls - 6
            ),
            calls,
            bytes,
            screenshot_b64: screenshot_b64(&caller),
        });
        calculator.assert_unharmed(desktop);
        chromium.assert_unharmed(desktop);

        println!(
            "load average (1, 5, 15 min) at the start: {load_before}; at the end: {}; p50 of {RUNS} runs (Python: {PYTHON_RUNS})",
            load_average()
        );
        println!();
        println!("| measure | computer | anchor (same run) | ratio |");
        println!("|---|---|---|---|");
        println!(
            "| `ax tree` of LibreOffice Writer showing a 300-paragraph document with a table (the whole app), through the daemon (socket, receipts), p50 | {tree_ms:.1} ms, {nodes} nodes | Python libatspi walk of the same app (role, name, states, children; an object's children read by the same rule as ours; timed inside the client, from the app object), p50: {walk_ms:.1} ms, {their_nodes} nodes | {:.2}× ({:.1}× faster) |",
            tree_ms / walk_ms,
            walk_ms / tree_ms
        );
        println!(
            "| `ax find` of `{selector}` in a local page in Chromium (the whole app, {chromium_nodes} nodes), p50 | {find_ms:.1} ms | Python libatspi client finding the same button (same children rule; stops at the first match, node {visited}), p50: {their_find_ms:.1} ms | {:.2}× ({:.1}× faster) |",
            find_ms / their_find_ms,
            their_find_ms / find_ms
        );
        println!();
        println!(
            "| task | calls | model-visible bytes (text + structured content of every reply) | anchor: one PNG screenshot (base64) per step | ratio |"
        );
        println!("|---|---|---|---|---|");
        let (mut all_bytes, mut all_anchor, mut all_calls) = (0, 0, 0);
        for row in &rows {
            let anchor = row.screenshot_b64 * row.calls;
            all_bytes += row.bytes;
            all_anchor += anchor;
            all_calls += row.calls;
            println!(
                "| {} | {} | {} B | {} × {} B = {} B | {:.4}× |",
                row.name,
                row.calls,
                row.bytes,
                row.calls,
                row.screenshot_b64,
                anchor,
                row.bytes as f64 / anchor as f64
            );
        }
        println!(
            "| all four | {all_calls} | {all_bytes} B | {all_anchor} B | {:.4}× |",
            all_bytes as f64 / all_anchor as f64
        );
    }
}

#[cfg(target_os = "linux")]
fn main() {
    linux::main();
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!(
        "the real-apps bench runs on Linux, against Debian's apps and a Python AT-SPI client"
    );
}
