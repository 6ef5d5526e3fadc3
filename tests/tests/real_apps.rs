//! The real-apps suite: tasks an agent does every day, done through the daemon as an agent
//! would (`ax find`/`act`/`read`/`wait`, `gui focus`/`type`/`key`) in Debian's own Chromium,
//! Firefox ESR, LibreOffice Calc and Writer, gedit, GNOME Text Editor, gnome-calculator and
//! Thunar, each checked from outside the daemon (the local web server's log of POSTed forms,
//! the saved files, the file system), with a memory guard on every app and the check that no app
//! was harmed (still running, still answering AT-SPI). One binary, one desktop, one instance of
//! each browser; tests that type hold the desk (one keyboard focus per desktop).

use std::fmt::Display;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use computer_tests::Daemon;
use computer_tests::apps::{
    self, PRICE_ROWS, RealApp, WebServer, call, odf_content, out_dir, wait_saved, wait_window,
};
use computer_tests::desktop::{Desktop, TestDesktop};
use computer_tests::try_wait_for;
use serde_json::{Value, json};

/// Keyboard focus is one per desktop: a test holds the desk while it launches its app (a new
/// window takes the focus) and while it focuses a window and types.
fn desk() -> MutexGuard<'static, ()> {
    static DESK: Mutex<()> = Mutex::new(());
    DESK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Every broken step of a task, so one run reports them all rather than the first; the test
/// fails at its end if any step did, or if an app was harmed.
struct Findings {
    task: &'static str,
    failures: Vec<String>,
}

impl Findings {
    fn new(task: &'static str) -> Findings {
        Findings {
            task,
            failures: Vec::new(),
        }
    }

    /// Records `what` as a failure unless `ok`.
    fn check(&mut self, ok: bool, what: impl Display) -> bool {
        if !ok {
            eprintln!("FAILED ({}): {what}", self.task);
            self.failures.push(what.to_string());
        }
        ok
    }

    /// An act's reply succeeded and its `effect` is one of `allowed`.
    fn act_effect(&mut self, step: &str, reply: &Value, allowed: &[&str]) -> bool {
        let ok = self.check(
            reply["ok"] == true,
            format!("{step}: the call failed: {reply}"),
        );
        ok && self.check(
            reply["effect"]
                .as_str()
                .is_some_and(|effect| allowed.contains(&effect)),
            format!(
                "{step}: effect {} ({}), expected one of {allowed:?}",
                reply["effect"], reply["effect_evidence"]
            ),
        )
    }

    /// Whether the app still runs, was not stopped by the guard and answers AT-SPI; recorded.
    fn unharmed(&mut self, app: &RealApp, after: &str) -> bool {
        let harm = harm_to(app);
        self.check(
            harm.is_none(),
            format!(
                "{} harmed after {after}: {}",
                app.name,
                harm.unwrap_or_default()
            ),
        )
    }

    /// Fails the test with every failure, and if any app was harmed; the daemon's log then
    /// goes to the test's output.
    fn finish(mut self, daemon: &Daemon, apps: &[&RealApp]) {
        for app in apps {
            self.unharmed(app, "the task");
            eprintln!(
                "{}: peak {} MiB over the suite so far, {} MiB now",
                app.name,
                app.peak_kib() / 1024,
                app.rss_kib() / 1024
            );
        }
        if !self.failures.is_empty() {
            let log = daemon.log_text();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!(
                "daemon log (last {} lines):\n{}",
                tail.len(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        assert!(
            self.failures.is_empty(),
            "{}: {} step(s) failed:\n- {}",
            self.task,
            self.failures.len(),
            self.failures.join("\n- ")
        );
    }
}

/// What happened to `app`, if anything: stopped by the guard, gone, or not answering AT-SPI.
fn harm_to(app: &RealApp) -> Option<String> {
    if let Some(violation) = app.violation() {
        return Some(format!("memory guard: {violation}"));
    }
    if !app.is_running() {
        return Some(format!("pid {} is gone", app.leader));
    }
    apps::atspi_child_count(Desktop::shared(), app.pid(), Duration::from_secs(5))
        .err()
        .map(|err| format!("no AT-SPI answer: {err}"))
}

const CALL_LIMIT: Duration = Duration::from_secs(60);

fn ax(daemon: &Daemon, command: &str, args: Value) -> Value {
    call(daemon, "ax", command, args, CALL_LIMIT)
}

fn gui(daemon: &Daemon, command: &str, args: Value) -> Value {
    call(daemon, "gui", command, args, CALL_LIMIT)
}

/// Focuses the app's window titled ~`title` (through the daemon) and returns its entry.
fn focus(daemon: &Daemon, app: &RealApp, title: &str, findings: &mut Findings) -> Value {
    let window = wait_window(daemon, app, title, Duration::from_secs(60));
    let reply = gui(daemon, "focus", json!({"window": window["id"]}));
    findings.check(
        reply["ok"] == true,
        format!("gui focus on {}'s window: {reply}", app.name),
    );
    window
}

/// `(ref, name)` of every line of an outline, in order.
fn outline_nodes(outline: &str) -> Vec<(u64, String)> {
    outline
        .lines()
        .filter_map(|line| {
            let inner = line.trim_start().strip_prefix('[')?;
            let close = inner.find(']')?;
            let r = inner[..close].parse().ok()?;
            // The first quoted string after the role is the name (`\"` inside it escaped).
            let rest = &inner[close + 1..];
            let mut name = String::new();
            if let Some((_, quoted)) = rest.split_once('"') {
                let mut chars = quoted.chars();
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => name.extend(chars.next()),
                        c => name.push(c),
                    }
                }
            }
            Some((r, name))
        })
        .collect()
}

/// Polls `ax find` until `selector` matches in `app`; the reply, or None after `limit`.
fn wait_found(daemon: &Daemon, app: &RealApp, selector: &str, limit: Duration) -> Option<Value> {
    try_wait_for(limit, || {
        let reply = ax(
            daemon,
            "find",
            json!({"app": app.pid(), "selector": selector}),
        );
        (reply["ok"] == true && reply["total"].as_u64().unwrap_or(0) > 0).then_some(reply)
    })
}

/// Opens `url` in the browser's window the way an agent would: the address bar, typed, Enter.
fn open_page(daemon: &Daemon, browser: &RealApp, url: &str, findings: &mut Findings) {
    focus(daemon, browser, "", findings);
    let key = gui(daemon, "key", json!({"combo": "ctrl+l"}));
    findings.check(key["ok"] == true, format!("ctrl+l: {key}"));
    let typed = gui(daemon, "type", json!({"text": format!("{url}\n")}));
    findings.check(typed["ok"] == true, format!("typing the address: {typed}"));
}

/// The order form's text field.
const FORM_FIELD: &str = "textInput \"Full name\"";

/// What a web-form task starts from: the desk held, the order form open in the browser (its
/// text field found), a daemon on the desktop, and the task's findings.
struct FormTask {
    _desk: MutexGuard<'static, ()>,
    browser: &'static RealApp,
    daemon: Daemon,
    findings: Findings,
}

fn form_task(browser: fn() -> &'static Arc<RealApp>, tag: &str, task: &'static str) -> FormTask {
    let server = WebServer::shared();
    let desk = desk();
    let browser: &'static RealApp = browser();
    let daemon = Daemon::start_on_desktop("");
    let mut findings = Findings::new(task);
    let url = server.url(&format!("/form/{tag}"));
    open_page(&daemon, browser, &url, &mut findings);
    let found = wait_found(&daemon, browser, FORM_FIELD, Duration::from_secs(45));
    assert!(
        found.is_some(),
        "{task}: the form's text field never showed through `ax find {FORM_FIELD}`; failures so \
         far: {:?}",
        findings.failures
    );
    FormTask {
        _desk: desk,
        browser,
        daemon,
        findings,
    }
}

/// Fills and submits the order form through `ax act` and checks what the server received.
fn web_form(browser: fn() -> &'static Arc<RealApp>, tag: &'static str, task: &'static str) {
    let server = WebServer::shared();
    let FormTask {
        _desk,
        browser,
        daemon,
        mut findings,
    } = form_task(browser, tag, task);
    let field = FORM_FIELD;

    // Neither browser takes a web field's text through the accessibility API (Chromium exposes
    // no editable text, Firefox's accepts the call and changes nothing): `set_value` types it,
    // over what the field held, and reads it back.
    for value in ["Charles Babbage", "Ada Lovelace"] {
        let reply = ax(
            &daemon,
            "act",
            json!({"app": browser.pid(), "selector": field, "action": "set_value", "value": value}),
        );
        if findings.act_effect(
            &format!("set_value {value:?} on the text field"),
            &reply,
            &["confirmed"],
        ) {
            findings.check(
                reply["via"] == "keys" && reply["value"] == value,
                format!("set_value on a web field: typed through keys and read back as {value:?}: {reply}"),
            );
        }
    }
    // A line break in a one-line field would submit the form: refused, nothing typed.
    let reply = ax(
        &daemon,
        "act",
        json!({"app": browser.pid(), "selector": field, "action": "set_value", "value": "x\ny"}),
    );
    findings.check(
        reply["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("one-line field")),
        format!("set_value with a line break into a one-line field should be refused: {reply}"),
    );

    let reply = ax(
        &daemon,
        "act",
        json!({"app": browser.pid(), "selector": "checkBox \"Gift wrap\"", "action": "toggle"}),
    );
    if findings.act_effect("toggle on the checkbox", &reply, &["confirmed"]) {
        findings.check(
            reply["changed"].to_string().contains("+checked"),
            format!("toggle: the checkbox's states did not gain checked: {reply}"),
        );
    }

    let reply = ax(
        &daemon,
        "act",
        json!({"app": browser.pid(), "selector": "comboBox \"Size\" > * \"Large\"", "action": "select"}),
    );
    findings.act_effect("select of the option Large", &reply, &["confirmed"]);
    let read = ax(
        &daemon,
        "read",
        json!({"app": browser.pid(), "selector": "comboBox \"Size\""}),
    );
    findings.check(
        read["value"] == "Large"
            || read["text"] == "Large"
            || read["node"].to_string().contains("\"Large\""),
        format!("ax read of the select does not read Large: {read}"),
    );

    let reply = ax(
        &daemon,
        "act",
        json!({"app": browser.pid(), "selector": "button \"Submit order\"", "action": "press"}),
    );
    findings.act_effect("press on Submit", &reply, &["confirmed", "unverifiable"]);

    let path = format!("/submit/{tag}");
    let posted = try_wait_for(Duration::from_secs(20), || {
        let bodies = server.posted_to(&path);
        (!bodies.is_empty()).then_some(bodies)
    });
    findings.check(
        posted.as_deref() == Some(&["name=Ada+Lovelace&gift=yes&size=l".to_string()][..]),
        format!("the server received {posted:?} at {path}, expected one POST of name=Ada+Lovelace&gift=yes&size=l"),
    );
    findings.finish(&daemon, &[browser]);
}

/// Reads the price table's cells through `ax find` and `ax read` and compares with the page.
fn web_table(browser: fn() -> &'static Arc<RealApp>, task: &'static str) {
    let server = WebServer::shared();
    let _desk = desk();
    let browser: &RealApp = browser();
    let daemon = Daemon::start_on_desktop("");
    let mut findings = Findings::new(task);
    open_page(&daemon, browser, &server.url("/table"), &mut findings);
    let found = wait_found(&daemon, browser, "table > cell", Duration::from_secs(45));
    let Some(found) = found else {
        let tree = ax(&daemon, "tree", json!({"app": browser.pid()}));
        panic!("{task}: `ax find table > cell` never matched; the tree: {tree}");
    };
    let cells = outline_nodes(found["matches"].as_str().unwrap_or_default());
    let want: Vec<&str> = PRICE_ROWS.iter().flatten().copied().collect();
    // A cell's value is its name on the outline, else its text read with `ax read`.
    let values: Vec<String> = cells
        .iter()
        .map(|(r, name)| {
            if !name.is_empty() {
                return name.clone();
            }
            let read = ax(&daemon, "read", json!({"ref": r}));
            read["text"]
                .as_str()
                .or(read["value"].as_str())
                .unwrap_or_default()
                .trim()
                .to_string()
        })
        .collect();
    findings.check(
        values == want,
        format!("the table's cells read {values:?}, the page has {want:?}"),
    );
    // `ax read` of one cell gives its text.
    if let Some((r, _)) = cells.get(4) {
        let read = ax(&daemon, "read", json!({"ref": r}));
        findings.check(
            read["ok"] == true
                && (read["text"].as_str().map(str::trim) == Some("2.75")
                    || read["node"].to_string().contains("\"2.75\"")),
            format!("ax read of the second row's price: {read}"),
        );
    }
    findings.finish(&daemon, &[browser]);
}

#[test]
fn chromium_fills_and_submits_a_web_form() {
    web_form(apps::chromium, "chromium", "Chromium web form");
}

#[test]
fn firefox_fills_and_submits_a_web_form() {
    web_form(apps::firefox, "firefox", "Firefox web form");
}

/// The hostile agent's try: `set_value` on a web field while a terminal has the keyboard (the
/// browser keeps its focused element when another window is active), so that the keys it types
/// would land in the terminal. Nothing reaches the terminal; typing there stays `gui type`'s,
/// decided as a shell run. The terminal reads its keys one by one into a file, and a key typed
/// after, through `gui type`, shows in the file: so nothing came before it.
fn set_value_while_a_terminal_has_the_keyboard(
    browser: fn() -> &'static Arc<RealApp>,
    task: &'static str,
) {
    let FormTask {
        _desk,
        browser,
        daemon,
        mut findings,
    } = form_task(browser, "terminal", task);
    let field = FORM_FIELD;
    // The field has the browser's focus before the terminal takes the keyboard.
    let focused = ax(
        &daemon,
        "act",
        json!({"app": browser.pid(), "selector": field, "action": "focus"}),
    );
    findings.act_effect("focus on the text field", &focused, &["confirmed"]);

    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys");
    let script = format!("stty -icanon -echo; exec cat > {}", keys.display());
    let title = format!("set-value-terminal-{}", browser.name);
    let title = title.as_str();
    let terminal = Desktop::shared().launch("xterm", &["-title", title, "-e", "sh", "-c", &script]);
    let window = try_wait_for(Duration::from_secs(30), || {
        let listed = gui(&daemon, "windows", json!({}));
        listed["windows"]
            .as_array()?
            .iter()
            .find(|w| w["title"] == title)
            .cloned()
    })
    .expect("the terminal's window never showed");
    let reply = gui(&daemon, "focus", json!({"window": window["id"]}));
    findings.check(
        reply["ok"] == true,
        format!("gui focus on the terminal: {reply}"),
    );
    assert!(
        try_wait_for(Duration::from_secs(10), || keys.exists().then_some(())).is_some(),
        "the terminal's reader never started"
    );

    let reply = ax(
        &daemon,
        "act",
        json!({"app": browser.pid(), "selector": field, "action": "set_value", "value": "echo planted"}),
    );
    // Either refused, or the browser took its window back and the field got the text.
    let refused = reply["ok"] == false;
    findings.check(
        refused || (reply["via"] == "keys" && reply["value"] == "echo planted"),
        format!("set_value while a terminal has the keyboard: {reply}"),
    );
    let reply = gui(&daemon, "focus", json!({"window": window["id"]}));
    findings.check(
        reply["ok"] == true,
        format!("gui focus on the terminal: {reply}"),
    );
    let typed = gui(&daemon, "type", json!({"text": "z"}));
    findings.check(
        typed["ok"] == true,
        format!("gui type into the terminal: {typed}"),
    );
    let got = try_wait_for(Duration::from_secs(10), || {
        let got = std::fs::read_to_string(&keys).ok()?;
        (!got.is_empty()).then_some(got)
    });
    findings.check(
        got.as_deref() == Some("z"),
        format!("the terminal received {got:?}; only the z typed after should be there"),
    );
    drop(terminal);
    findings.finish(&daemon, &[browser]);
}

#[test]
fn chromium_set_value_types_nothing_into_a_terminal_that_has_the_keyboard() {
    set_value_while_a_terminal_has_the_keyboard(
        apps::chromium,
        "Chromium set_value, terminal focused",
    );
}

#[test]
fn firefox_set_value_types_nothing_into_a_terminal_that_has_the_keyboard() {
    set_value_while_a_terminal_has_the_keyboard(
        apps::firefox,
        "Firefox set_value, terminal focused",
    );
}

#[test]
fn chromium_reads_a_web_table() {
    web_table(apps::chromium, "Chromium web table");
}

#[test]
fn firefox_reads_a_web_table() {
    web_table(apps::firefox, "Firefox web table");
}

/// Saves the focused document through the keyboard and the file dialog: `combo` opens the
/// dialog, `ax wait dialog` sees it, the path is typed into its name field, Enter saves.
fn save_through_dialog(
    daemon: &Daemon,
    app: &RealApp,
    combo: &str,
    file: &Path,
    findings: &mut Findings,
) -> bool {
    let key = gui(daemon, "key", json!({"combo": combo}));
    findings.check(key["ok"] == true, format!("{combo}: {key}"));
    let waited = ax(
        daemon,
        "wait",
        json!({"app": app.pid(), "selector": "dialog", "timeout_ms": 20000}),
    );
    findings.check(
        waited["ok"] == true && waited["met"] == true,
        format!("ax wait for the save dialog as `dialog`: {waited}"),
    );
    // Whatever the selector said, type once the dialog's window is up (checked on the window
    // list, so the rest of the task still runs).
    let dialog = try_wait_for(Duration::from_secs(20), || {
        let windows = gui(daemon, "windows", json!({}));
        let processes = app.processes();
        windows["windows"].as_array()?.iter().find_map(|w| {
            let title = w["title"].as_str()?;
            (processes.contains(&(w["pid"].as_u64()? as u32)) && title.starts_with("Save"))
                .then(|| w.clone())
        })
    });
    if !findings.check(
        dialog.is_some(),
        format!("no save dialog window appeared after {combo}"),
    ) {
        return false;
    }
    // The name field has the focus with the proposed name's stem selected (GTK4 leaves the
    // extension out): select it all, then the path replaces it.
    let all = gui(daemon, "key", json!({"combo": "ctrl+a"}));
    findings.check(all["ok"] == true, format!("ctrl+a in the dialog: {all}"));
    let typed = gui(daemon, "type", json!({"text": file.display().to_string()}));
    findings.check(typed["ok"] == true, format!("typing the path: {typed}"));
    let enter = gui(daemon, "key", json!({"combo": "Return"}));
    findings.check(enter["ok"] == true, format!("Enter in the dialog: {enter}"));
    findings.check(
        wait_saved(file, Duration::from_secs(30)),
        format!("{} was not saved", file.display()),
    )
}

#[test]
fn calc_survives_the_tree_and_saves_a_formula() {
    let _desk = desk();
    let calc = apps::libreoffice("--calc");
    let daemon = Daemon::start_on_desktop("");
    let mut findings = Findings::new("Calc");
    focus(&daemon, &calc, "LibreOffice Calc", &mut findings);

    // Do no harm: a tree and a find aimed at the sheet answer, and Calc still answers after.
    let tree = ax(&daemon, "tree", json!({"app": calc.pid()}));
    findings.check(tree["ok"] == true, format!("ax tree of Calc: {tree}"));
    let harmed = !findings.unharmed(&calc, "ax tree");
    let find = ax(
        &daemon,
        "find",
        json!({"app": calc.pid(), "selector": "cell"}),
    );
    findings.check(
        find["ok"] == true || find["error"]["code"] == "no_match",
        format!("ax find cell in Calc: {find}"),
    );
    let harmed = harmed || !findings.unharmed(&calc, "ax find");
    let focused = ax(&daemon, "focused", json!({"app": calc.pid()}));
    findings.check(
        focused["ok"] == true,
        format!("ax focused in Calc: {focused}"),
    );
    if harmed || !findings.unharmed(&calc, "ax focused") {
        findings.finish(&daemon, &[&calc]);
        return;
    }

    // A formula in A1, typed as an agent would.
    focus(&daemon, &calc, "LibreOffice Calc", &mut findings);
    let home = gui(&daemon, "key", json!({"combo": "ctrl+Home"}));
    findings.check(home["ok"] == true, format!("ctrl+Home: {home}"));
    let typed = gui(&daemon, "type", json!({"text": "=6*7"}));
    findings.act_effect("typing =6*7 into A1", &typed, &["confirmed"]);
    let enter = gui(&daemon, "key", json!({"combo": "Return"}));
    findings.check(enter["ok"] == true, format!("Enter: {enter}"));
    findings.unharmed(&calc, "typing into a cell");

    let (_keep, dir) = out_dir("real-apps-calc-out-");
    let file = dir.join("sheet.ods");
    if save_through_dialog(&daemon, &calc, "ctrl+shift+s", &file, &mut findings) {
        let (_, xml) = odf_content(&file);
        findings.check(
            xml.contains("of:=6*7") && xml.contains("office:value=\"42\""),
            format!("the saved sheet has no =6*7 worth 42 in its content.xml: {xml}"),
        );
    }
    findings.finish(&daemon, &[&calc]);
}

#[test]
fn writer_types_two_paragraphs_and_saves_them() {
    let _desk = desk();
    let writer = apps::libreoffice("--writer");
    let daemon = Daemon::start_on_desktop("");
    let mut findings = Findings::new("Writer");
    focus(&daemon, &writer, "LibreOffice Writer", &mut findings);
    let typed = gui(
        &daemon,
        "type",
        json!({"text": "Hello from the suite.\nA second line."}),
    );
    findings.act_effect("typing two paragraphs", &typed, &["confirmed"]);
    let (_keep, dir) = out_dir("real-apps-writer-out-");
    let file = dir.join("letter.odt");
    if save_through_dialog(&daemon, &writer, "ctrl+shift+s", &file, &mut findings) {
        let (paragraphs, _) = odf_content(&file);
        findings.check(
            paragraphs == ["Hello from the suite.", "A second line."],
            format!("the saved document's paragraphs: {paragraphs:?}"),
        );
    }
    findings.finish(&daemon, &[&writer]);
}

/// Types three lines into a text editor, saves with ctrl+s and the dialog, checks the file.
fn editor_saves_typed_lines(app: Arc<RealApp>, task: &'static str) {
    let daemon = Daemon::start_on_desktop("");
    let mut findings = Findings::new(task);
    focus(&daemon, &app, "", &mut findings);
    let text = "alpha\nbeta\ngamma";
    let typed = gui(&daemon, "type", json!({"text": text}));
    findings.act_effect("typing three lines", &typed, &["confirmed"]);
    let (_keep, dir) = out_dir("real-apps-editor-out-");
    let file = dir.join("lines.txt");
    if save_through_dialog(&daemon, &app, "ctrl+s", &file, &mut findings) {
        let saved = std::fs::read_to_string(&file).unwrap_or_default();
        // Both editors end a saved file with a newline of their own.
        findings.check(
            saved == format!("{text}\n"),
            format!(
                "the saved file holds {saved:?}, expected {:?}",
                format!("{text}\n")
            ),
        );
    }
    findings.finish(&daemon, &[&app]);
}

#[test]
fn gedit_saves_typed_lines() {
    let _desk = desk();
    let app = apps::small_app("gedit", "gedit", &["--new-window"]);
    editor_saves_typed_lines(app, "gedit");
}

#[test]
fn gnome_text_editor_saves_typed_lines() {
    let _desk = desk();
    let app = apps::small_app("gnome-text-editor", "gnome-text-editor", &["--new-window"]);
    editor_saves_typed_lines(app, "GNOME Text Editor");
}

#[test]
fn calculator_multiplies_through_its_buttons() {
    // The display reads as focused only while its window is the active one.
    let _desk = desk();
    let app = apps::small_app("gnome-calculator", "gnome-calculator", &[]);
    let daemon = Daemon::start_on_desktop("");
    let mut findings = Findings::new("gnome-calculator");
    focus(&daemon, &app, "Calculator", &mut findings);
    // GTK4 names each button by its label twice ("7 7").
    for button in ["7 7", "× ×", "6 6", "= ="] {
        let reply = ax(
            &daemon,
            "act",
            json!({"app": app.pid(), "selector": format!("button \"{button}\""), "action": "press"}),
        );
        findings.act_effect(
            &format!("press {button:?}"),
            &reply,
            &["confirmed", "unverifiable"],
        );
    }
    // The display is the focused text view; it shows the result.
    let focused_read = try_wait_for(Duration::from_secs(10), || {
        let read = ax(
            &daemon,
            "read",
            json!({"app": app.pid(), "selector": "[focused]"}),
        );
        (read["text"].as_str().map(str::trim) == Some("42")).then_some(read)
    });
    if focused_read.is_none() {
        let last = ax(
            &daemon,
            "read",
            json!({"app": app.pid(), "selector": "[focused]"}),
        );
        findings.check(
            false,
            format!("the focused display does not read 42 through ax read [focused]: {last}"),
        );
        // What an agent does next: read the text views it can find.
        let views = ax(
            &daemon,
            "find",
            json!({"app": app.pid(), "selector": "multilineTextInput"}),
        );
        let texts: Vec<String> = outline_nodes(views["matches"].as_str().unwrap_or_default())
            .into_iter()
            .map(|(r, _)| {
                let read = ax(&daemon, "read", json!({"ref": r}));
                read["text"].as_str().unwrap_or_default().trim().to_string()
            })
            .collect();
        findings.check(
            texts.iter().any(|text| text == "42"),
            format!("no text view of the calculator reads 42: {texts:?} ({views})"),
        );
    }
    findings.finish(&daemon, &[&app]);
}

#[test]
fn thunar_renames_a_file_and_survives_reads_of_its_rows() {
    let (_keep, dir) = out_dir("real-apps-thunar-dir-");
    std::fs::write(dir.join("report-draft.txt"), "draft\n").unwrap();
    std::fs::write(dir.join("notes.txt"), "notes\n").unwrap();
    let _desk = desk();
    let app = apps::small_app("thunar", "thunar", &[dir.to_str().unwrap()]);
    let daemon = Daemon::start_on_desktop("");
    let mut findings = Findings::new("Thunar");
    let title = dir.file_name().unwrap().to_str().unwrap();
    focus(&daemon, &app, title, &mut findings);
    // The icon view exposes no items: the list view does.
    let key = gui(&daemon, "key", json!({"combo": "ctrl+2"}));
    findings.check(key["ok"] == true, format!("ctrl+2: {key}"));
    let row = "* \"report-draft.txt\" #1";
    let found = wait_found(
        &daemon,
        &app,
        "* \"report-draft.txt\"",
        Duration::from_secs(20),
    );
    assert!(
        found.is_some(),
        "Thunar: the file never showed through ax find; failures so far: {:?}",
        findings.failures
    );

    // `ax read` of a file row, again and again: Thunar stays up.
    for attempt in 1..=5 {
        let read = ax(
            &daemon,
            "read",
            json!({"app": app.pid(), "selector": "* \"notes.txt\" #1"}),
        );
        findings.check(
            read["ok"] == true,
            format!("ax read of a row ({attempt}): {read}"),
        );
        if !findings.unharmed(&app, &format!("ax read of a row ({attempt})")) {
            findings.finish(&daemon, &[&app]);
            return;
        }
    }

    let select = ax(
        &daemon,
        "act",
        json!({"app": app.pid(), "selector": row, "action": "select"}),
    );
    if !findings.act_effect("select of the file's row", &select, &["confirmed"]) {
        // What an agent does next: click the row where AT-SPI says it is.
        let read = ax(&daemon, "read", json!({"app": app.pid(), "selector": row}));
        if let Some([x, y, w, h]) = read["bounds"]
            .as_array()
            .and_then(|b| <[Value; 4]>::try_from(b.clone()).ok())
        {
            let (x, y, w, h) = (x.as_i64(), y.as_i64(), w.as_i64(), h.as_i64());
            if let (Some(x), Some(y), Some(w), Some(h)) = (x, y, w, h) {
                let click = gui(&daemon, "click", json!({"x": x + w / 2, "y": y + h / 2}));
                findings.check(click["ok"] == true, format!("click on the row: {click}"));
            }
        }
    }
    focus(&daemon, &app, title, &mut findings);
    let f2 = gui(&daemon, "key", json!({"combo": "F2"}));
    findings.check(f2["ok"] == true, format!("F2: {f2}"));
    // The rename field holds the name with its stem selected: select all, type the new name.
    let editing = try_wait_for(Duration::from_secs(10), || {
        let focused = ax(&daemon, "focused", json!({"app": app.pid()}));
        focused["node"]
            .as_str()
            .is_some_and(|node| node.contains("textInput"))
            .then_some(focused)
    });
    findings.check(editing.is_some(), "F2 opened no rename field");
    let all = gui(&daemon, "key", json!({"combo": "ctrl+a"}));
    findings.check(all["ok"] == true, format!("ctrl+a: {all}"));
    let typed = gui(&daemon, "type", json!({"text": "report-final.txt"}));
    findings.act_effect("typing the new name", &typed, &["confirmed"]);
    let enter = gui(&daemon, "key", json!({"combo": "Return"}));
    findings.check(enter["ok"] == true, format!("Enter: {enter}"));
    let renamed = try_wait_for(Duration::from_secs(15), || {
        (dir.join("report-final.txt").exists() && !dir.join("report-draft.txt").exists())
            .then_some(())
    });
    let listing: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    findings.check(
        renamed.is_some(),
        format!(
            "report-draft.txt was not renamed to report-final.txt; the directory holds {listing:?}"
        ),
    );
    findings.finish(&daemon, &[&app]);
}

/// FeatherPad (Qt5): three lines typed and read back through `ax read`; saved through Qt's own
/// file dialog, found as `dialog`, its name field filled with `ax act set_value` and its Save
/// button pressed with `ax act press`; a fourth line saved with the toolbar's Save button. The
/// saved file is read after each save.
#[test]
fn featherpad_saves_through_its_qt_dialog_and_buttons() {
    let _desk = desk();
    let app = apps::featherpad();
    let daemon = Daemon::start_on_desktop("");
    let mut findings = Findings::new("FeatherPad (Qt)");
    focus(&daemon, &app, "", &mut findings);
    let text = "alpha\nbeta\ngamma";
    let typed = gui(&daemon, "type", json!({"text": text}));
    findings.act_effect("typing three lines", &typed, &["confirmed"]);
    let editor = "multilineTextInput";
    let read = ax(
        &daemon,
        "read",
        json!({"app": app.pid(), "selector": editor}),
    );
    findings.check(
        read["text"] == text,
        format!("ax read of the editor should give the three lines: {read}"),
    );

    let (_keep, dir) = out_dir("real-apps-featherpad-out-");
    let file = dir.join("lines.txt");
    let key = gui(&daemon, "key", json!({"combo": "ctrl+s"}));
    findings.check(key["ok"] == true, format!("ctrl+s: {key}"));
    let waited = ax(
        &daemon,
        "wait",
        json!({"app": app.pid(), "selector": "dialog", "timeout_ms": 20000}),
    );
    findings.check(
        waited["ok"] == true && waited["met"] == true,
        format!("ax wait for Qt's save dialog as `dialog`: {waited}"),
    );
    let path = file.display().to_string();
    let set = ax(
        &daemon,
        "act",
        json!({"app": app.pid(), "selector": "dialog > textInput \"File name:\"",
               "action": "set_value", "value": path}),
    );
    findings.act_effect("set_value of the dialog's file name", &set, &["confirmed"]);
    let save = ax(
        &daemon,
        "act",
        json!({"app": app.pid(), "selector": "dialog > button \"Save\"", "action": "press"}),
    );
    findings.act_effect("press on the dialog's Save", &save, &["confirmed"]);
    let saved = wait_saved(&file, Duration::from_secs(30));
    let content = std::fs::read_to_string(&file).unwrap_or_default();
    // FeatherPad ends a saved file with a newline of its own.
    findings.check(
        saved && content == format!("{text}\n"),
        format!("the dialog saved {content:?} to {path}, expected {text:?} and a newline"),
    );

    // The newline it saved is in the document too: the next line starts after it.
    let read = ax(
        &daemon,
        "read",
        json!({"app": app.pid(), "selector": editor}),
    );
    findings.check(
        read["text"] == format!("{text}\n"),
        format!("ax read of the editor after the save: {read}"),
    );

    // One more line, saved with the toolbar's button: no dialog, the same file.
    focus(&daemon, &app, "lines.txt", &mut findings);
    let end = gui(&daemon, "key", json!({"combo": "ctrl+End"}));
    findings.check(end["ok"] == true, format!("ctrl+End: {end}"));
    let typed = gui(&daemon, "type", json!({"text": "delta"}));
    findings.act_effect("typing a fourth line", &typed, &["confirmed"]);
    let save = ax(
        &daemon,
        "act",
        json!({"app": app.pid(), "selector": "toolBar > button \"Save\"", "action": "press"}),
    );
    findings.act_effect("press on the toolbar's Save", &save, &["confirmed"]);
    let want = format!("{text}\ndelta\n");
    let resaved = try_wait_for(Duration::from_secs(20), || {
        (std::fs::read_to_string(&file).ok()? == want).then_some(())
    });
    findings.check(
        resaved.is_some(),
        format!(
            "after the toolbar's Save the file holds {:?}, expected {want:?}",
            std::fs::read_to_string(&file).unwrap_or_default()
        ),
    );
    featherpad_save_as_from_its_menu(&daemon, &app, &mut findings);
    findings.finish(&daemon, &[&app]);
}

/// FeatherPad's "Save As" menu item pressed through `ax act`: Qt 5 answers the action only once
/// the modal dialog it opens closes, so the act is `done` with `via: "reply_held"` (the app
/// answers other calls meanwhile); the dialog then shows as `dialog` and its Cancel button
/// closes it.
fn featherpad_save_as_from_its_menu(daemon: &Daemon, app: &RealApp, findings: &mut Findings) {
    let press = ax(
        daemon,
        "act",
        json!({"app": app.pid(), "selector": "menuItem \"Save As\"", "action": "press"}),
    );
    findings.check(
        press["ok"] == true && press["done"] == true,
        format!("press on the menu's Save As should be done: {press}"),
    );
    let waited = ax(
        daemon,
        "wait",
        json!({"app": app.pid(), "selector": "dialog", "timeout_ms": 20000}),
    );
    findings.check(
        waited["met"] == true,
        format!("no dialog after the menu's Save As: {waited}"),
    );
    let cancel = ax(
        daemon,
        "act",
        json!({"app": app.pid(), "selector": "dialog > button \"Cancel\"", "action": "press"}),
    );
    findings.act_effect("press on the dialog's Cancel", &cancel, &["confirmed"]);
    let gone = ax(
        daemon,
        "wait",
        json!({"app": app.pid(), "selector": "dialog", "until": "disappears", "timeout_ms": 20000}),
    );
    findings.check(
        gone["met"] == true,
        format!("the dialog stayed after Cancel: {gone}"),
    );
}
