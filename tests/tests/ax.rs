//! The ax surface against real AT-SPI on the shared headless desktop: a small GTK3 app whose
//! effects are observed on its own stdout and through a second AT-SPI client (libatspi from
//! Python), gtk3-widget-factory for big trees, zenity for the documented one-liner.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use computer_tests::desktop::{Desktop, TestApp, TestDesktop, gi_python};
use computer_tests::{Daemon, wait_for};
use serde_json::{Value, json};

fn clients_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("clients")
}

async fn ax(daemon: &Daemon, command: &str, args: Value) -> Value {
    ax_with(daemon, command, args, json!({})).await
}

async fn ax_with(daemon: &Daemon, command: &str, args: Value, complications: Value) -> Value {
    daemon
        .call_raw_once(json!({"surface": "ax", "command": command, "args": args, "complications": complications}))
        .await
}

/// Waits until the app's window is on the bus, returning the tree outline.
async fn wait_tree(daemon: &Daemon, pid: u32) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = ax(daemon, "tree", json!({"app": pid})).await;
        if out["ok"] == true && out["tree"].as_str().is_some_and(|t| t.contains("button")) {
            return out;
        }
        assert!(
            Instant::now() < deadline,
            "the app never showed on AT-SPI: {out}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The ref of the first outline line containing `needle`.
fn ref_of(outline: &str, needle: &str) -> u64 {
    let line = outline
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{outline}"));
    let inner = line.trim_start().trim_start_matches('[');
    inner[..inner.find(']').unwrap()].parse().unwrap()
}

/// A second, independent AT-SPI client's view of the node named `name`.
fn second_client_find(pid: u32, name: &str) -> Value {
    // A walk can meet a node the app is replacing at that moment; a fresh walk then reads the
    // settled tree. Three walks that all fail are a real failure, reported with the client's words.
    let mut failures = Vec::new();
    for _ in 0..3 {
        let out = Desktop::shared()
            .command(&gi_python())
            .arg(clients_dir().join("atspi_dump.py"))
            .args([&pid.to_string(), "--find", name])
            .output()
            .expect("python3 atspi_dump.py");
        match serde_json::from_slice::<Value>(&out.stdout) {
            Ok(found) if found.get("error").is_none() => return found,
            _ => failures.push(format!(
                "{} {}",
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            )),
        }
    }
    panic!("a second AT-SPI client could not read {name:?}: {failures:?}")
}

#[tokio::test(flavor = "multi_thread")]
async fn tree_shows_known_widgets_with_accesskit_roles_and_stable_refs() {
    let daemon = Daemon::start_on_desktop("");
    let app = TestApp::launch("Tree Test");
    let out = wait_tree(&daemon, app.pid()).await;
    let tree = out["tree"].as_str().unwrap();
    for want in [
        "window \"Tree Test\"",
        "button \"Say Hello\" (",
        "textInput \"Your name\"",
        "checkBox \"Dark mode\"",
        "label \"Not clicked\"",
        "button \"Open Dialog\"",
    ] {
        assert!(tree.contains(want), "{want} missing from:\n{tree}");
    }
    assert!(
        out.get("truncated").is_none(),
        "a whole tree says nothing of a cut: {out}"
    );
    assert!(out["cursor"].is_null());
    let hello = ref_of(tree, "\"Say Hello\"");

    // Refs hold across calls and commands; `since` says nothing changed without resending.
    let again = ax(
        &daemon,
        "tree",
        json!({"app": app.pid(), "since": out["revision"]}),
    )
    .await;
    assert_eq!(again["unchanged"], true, "{again}");
    assert!(again.get("tree").is_none(), "{again}");
    let found = ax(
        &daemon,
        "find",
        json!({"app": app.pid(), "selector": "button \"Say Hello\""}),
    )
    .await;
    assert_eq!(
        ref_of(found["matches"].as_str().unwrap(), "Say Hello"),
        hello
    );
    assert_eq!(found["total"], 1);

    // JSON for programs carries the same roles.
    let json_out = ax(
        &daemon,
        "tree",
        json!({"app": app.pid(), "format": "json", "include": ["bounds", "actions"]}),
    )
    .await;
    let nodes: Vec<Value> = serde_json::from_str(json_out["tree"].as_str().unwrap()).unwrap();
    let button = nodes.iter().find(|n| n["name"] == "Say Hello").unwrap();
    assert_eq!(button["role"], "button");
    assert_eq!(button["ref"], hello);
    assert_eq!(
        button["actions"],
        json!(["Click"]),
        "GTK3 names the action Click"
    );
    assert!(
        button["bounds"].as_array().is_some_and(|b| b.len() == 4),
        "{button}"
    );
    assert!(nodes.iter().any(|n| n["role"] == "checkBox"));

    // The roles filter keeps only what was asked for.
    let only = ax(
        &daemon,
        "tree",
        json!({"app": app.pid(), "roles": ["checkBox", "textInput"]}),
    )
    .await;
    let text = only["tree"].as_str().unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");

    // apps lists the app with its pid and window.
    let apps = ax(&daemon, "apps", json!({})).await;
    let listing = apps["apps"].as_str().unwrap();
    assert!(
        listing.contains(&format!("pid {}", app.pid())) && listing.contains("\"Tree Test\""),
        "{listing}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn press_set_value_toggle_and_wait_have_real_effects() {
    let daemon = Daemon::start_on_desktop("");
    let app = TestApp::launch("Act Test");
    let pid = app.pid();
    wait_tree(&daemon, pid).await;

    let out = ax(
        &daemon,
        "act",
        json!({"app": pid, "selector": "button \"Say Hello\"", "action": "press"}),
    )
    .await;
    assert_eq!(out["ok"], true, "{out}");
    app.wait_line("clicked 1");
    // A second client sees the label the click changed.
    wait_for(
        "the label to change for another client",
        Duration::from_secs(10),
        || (second_client_find(pid, "Clicked 1 times")["role"] == "label").then_some(()),
    );

    let out = ax(&daemon, "act", json!({"app": pid, "selector": "textInput \"Your name\"", "action": "set_value", "value": "Ada Lovelace"})).await;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["value"], "Ada Lovelace");
    let read = ax(
        &daemon,
        "read",
        json!({"app": pid, "selector": "textInput \"Your name\""}),
    )
    .await;
    assert_eq!(read["text"], "Ada Lovelace", "{read}");
    assert_eq!(second_client_find(pid, "Your name")["text"], "Ada Lovelace");
    // Focus moves where asked, and `focused` reports it with its path.
    let out = ax(
        &daemon,
        "act",
        json!({"app": pid, "selector": "textInput \"Your name\"", "action": "focus"}),
    )
    .await;
    assert_eq!(out["ok"], true, "{out}");
    let focused = wait_for_async(|| async {
        let f = ax(&daemon, "focused", json!({"app": pid})).await;
        f["node"]
            .as_str()
            .is_some_and(|n| n.contains("textInput \"Your name\""))
            .then_some(f)
    })
    .await;
    assert!(
        focused["path"]
            .as_str()
            .unwrap()
            .contains("window \"Act Test\""),
        "{focused}"
    );
    ax(
        &daemon,
        "act",
        json!({"app": pid, "selector": "button \"Print Entry\"", "action": "press"}),
    )
    .await;
    app.wait_line("entry=Ada Lovelace");

    let out = ax(
        &daemon,
        "act",
        json!({"app": pid, "selector": "checkBox \"Dark mode\"", "action": "toggle"}),
    )
    .await;
    assert_eq!(out["ok"], true, "{out}");
    app.wait_line("check=True");
    let checked = ax(&daemon, "wait", json!({"app": pid, "selector": "checkBox \"Dark mode\"", "until": "checked", "timeout_ms": 3000})).await;
    assert_eq!(checked["met"], true, "{checked}");

    // A dialog appears and goes; wait sees both.
    ax(
        &daemon,
        "act",
        json!({"app": pid, "selector": "button \"Open Dialog\"", "action": "press"}),
    )
    .await;
    let appeared = ax(
        &daemon,
        "wait",
        json!({"app": pid, "selector": "dialog \"Confirm\"", "timeout_ms": 5000}),
    )
    .await;
    assert_eq!(appeared["met"], true, "{appeared}");
    app.wait_line("dialog opened");
    let out = ax(&daemon, "act", json!({"app": pid, "selector": "dialog \"Confirm\" > button \"Close Dialog\"", "action": "press"})).await;
    assert_eq!(out["ok"], true, "{out}");
    let gone = ax(&daemon, "wait", json!({"app": pid, "selector": "dialog \"Confirm\"", "until": "disappears", "timeout_ms": 5000})).await;
    assert_eq!(gone["met"], true, "{gone}");
    app.wait_line("dialog closed");

    // A wait that is not met ends at its bound with met=false.
    let started = Instant::now();
    let never = ax(
        &daemon,
        "wait",
        json!({"app": pid, "selector": "button \"Never There\"", "timeout_ms": 300}),
    )
    .await;
    assert_eq!(never["met"], false, "{never}");
    assert!(started.elapsed() < Duration::from_secs(3));
}

/// The states a second AT-SPI client reads for the node named `name`.
fn second_client_states(pid: u32, name: &str) -> Vec<String> {
    let found = second_client_find(pid, name);
    serde_json::from_value(found["states"].clone())
        .unwrap_or_else(|_| panic!("no states for {name:?}: {found}"))
}

async fn act(daemon: &Daemon, pid: u32, selector: &str, action: &str) -> Value {
    ax(
        daemon,
        "act",
        json!({"app": pid, "selector": selector, "action": action}),
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn select_expand_collapse_scroll_activate_and_numbers_have_real_effects() {
    let daemon = Daemon::start_on_desktop("");
    let app = TestApp::launch_with("More Test", &["--more"]);
    let pid = app.pid();
    wait_tree(&daemon, pid).await;

    // select: a list box row, through its list's Selection interface. The list manages its
    // descendants, so the app's cache leaves the rows out and the walk fetches them itself.
    let out = act(&daemon, pid, "listItem \"Banana\"", "select").await;
    assert_eq!(out["ok"], true, "{out}");
    assert_eq!(out["done"], true, "{out}");
    app.wait_line("selected=Banana");
    assert!(
        second_client_states(pid, "Banana").contains(&"selected".to_string()),
        "another client does not see Banana selected"
    );
    let out = act(&daemon, pid, "listItem \"Cherry\"", "select").await;
    assert_eq!(out["done"], true, "{out}");
    app.wait_line("selected=Cherry");

    // expand/collapse: GTK's expander offers only "activate"; a second expand is a no-op.
    let out = act(&daemon, pid, "button \"Details\"", "expand").await;
    assert_eq!(out["done"], true, "{out}");
    assert!(
        out["changed"]
            .as_array()
            .unwrap()
            .contains(&json!("+expanded")),
        "{out}"
    );
    app.wait_line("expanded=True");
    assert!(second_client_states(pid, "Details").contains(&"expanded".to_string()));
    let again = act(&daemon, pid, "button \"Details\"", "expand").await;
    assert_eq!(again["done"], true, "{again}");
    assert_eq!(again["via"], "already", "{again}");
    let out = act(&daemon, pid, "button \"Details\"", "collapse").await;
    assert_eq!(out["done"], true, "{out}");
    app.wait_line("expanded=False");
    // The no-op expand toggled nothing: the app saw exactly one expansion and one collapse.
    assert_eq!(
        app.lines_starting("expanded="),
        ["expanded=True", "expanded=False"]
    );
    assert!(!second_client_states(pid, "Details").contains(&"expanded".to_string()));

    // A tree view row: its cell says "expand or contract"; its children appear and go.
    let out = act(&daemon, pid, "cell \"Citrus\"", "expand").await;
    assert_eq!(out["done"], true, "{out}");
    app.wait_line("row expanded=Citrus");
    let lemon = ax(
        &daemon,
        "wait",
        json!({"app": pid, "selector": "cell \"Lemon\"", "timeout_ms": 5000}),
    )
    .await;
    assert_eq!(lemon["met"], true, "{lemon}");
    let out = act(&daemon, pid, "cell \"Citrus\"", "collapse").await;
    assert_eq!(out["done"], true, "{out}");
    app.wait_line("row collapsed=Citrus");

    // Expanding what cannot expand is refused, and says why.
    let out = act(&daemon, pid, "button \"Say Hello\"", "expand").await;
    assert_eq!(out["ok"], false, "{out}");
    let message = out["error"]["message"].as_str().unwrap();
    assert!(message.contains("not expandable"), "{message}");
    assert!(
        app.lines_starting("clicked").is_empty(),
        "expand clicked the button"
    );

    // scroll_into_view: the last item of a short scrolled list starts out of view.
    let before = ax(
        &daemon,
        "read",
        json!({"app": pid, "selector": "button \"Item 30\""}),
    )
    .await;
    assert!(
        !before["states"]
            .as_array()
            .unwrap()
            .contains(&json!("showing")),
        "Item 30 is already in view: {before}"
    );
    let out = act(&daemon, pid, "button \"Item 30\"", "scroll_into_view").await;
    assert_eq!(out["done"], true, "{out}");
    app.wait_line("scrolled");
    assert!(second_client_states(pid, "Item 30").contains(&"showing".to_string()));

    // set_value with a number changes a spin button's value, not just its text.
    let out = ax(
        &daemon,
        "act",
        json!({"app": pid, "selector": "spinButton \"Volume\"", "action": "set_value", "value": 42}),
    )
    .await;
    assert_eq!(out["done"], true, "{out}");
    assert_eq!(out["value"], 42.0, "{out}");
    app.wait_line("volume=42");

    // activate: the entry's own action, as Enter would.
    let out = ax(&daemon, "act", json!({"app": pid, "selector": "textInput \"Your name\"", "action": "set_value", "value": "Grace"})).await;
    assert_eq!(out["done"], true, "{out}");
    let out = act(&daemon, pid, "textInput \"Your name\"", "activate").await;
    assert_eq!(out["done"], true, "{out}");
    app.wait_line("activated=Grace");
}

#[tokio::test(flavor = "multi_thread")]
async fn ambiguous_missing_and_malformed_selectors_explain_themselves() {
    let daemon = Daemon::start_on_desktop("");
    let app = TestApp::launch("Selector Test");
    let pid = app.pid();
    wait_tree(&daemon, pid).await;

    let out = ax(
        &daemon,
        "act",
        json!({"app": pid, "selector": "button \"Duplicate\"", "action": "press"}),
    )
    .await;
    assert_eq!(out["ok"], false);
    let message = out["error"]["message"].as_str().unwrap();
    assert!(message.contains("matches 2 elements"), "{message}");
    assert_eq!(
        message.matches("] button \"Duplicate\"").count(),
        2,
        "{message}"
    );

    let out = ax(
        &daemon,
        "act",
        json!({"app": pid, "selector": "button \"Duplicate\":2", "action": "press"}),
    )
    .await;
    assert_eq!(out["ok"], true, "{out}");
    app.wait_line("duplicate");

    let out = ax(
        &daemon,
        "act",
        json!({"app": pid, "selector": "button \"Say Helo\"", "action": "press"}),
    )
    .await;
    let message = out["error"]["message"].as_str().unwrap();
    assert!(message.contains("no element matches"), "{message}");
    assert!(
        message.contains("similar:") && message.contains("button \"Say Hello\""),
        "{message}"
    );
    assert!(message.contains("there is:"), "{message}");

    let out = ax(
        &daemon,
        "find",
        json!({"app": pid, "selector": "button \"Say Hello"}),
    )
    .await;
    assert_eq!(out["error"]["code"], "invalid_call", "{out}");
    assert_eq!(out["error"]["path"], "args.selector");
    assert!(
        out["error"]["message"]
            .as_str()
            .unwrap()
            .contains("character 7"),
        "{out}"
    );

    let out = ax(
        &daemon,
        "find",
        json!({"app": pid, "selector": "button", "bogus": 1}),
    )
    .await;
    assert_eq!(out["error"]["path"], "args.bogus", "{out}");

    // Regex, contains, state filters and ancestor paths.
    let out = ax(
        &daemon,
        "find",
        json!({"app": pid, "selector": "window \"Selector Test\" > /^Say H.l+o$/"}),
    )
    .await;
    assert_eq!(out["total"], 1, "{out}");
    let out = ax(
        &daemon,
        "find",
        json!({"app": pid, "selector": "~\"dupl\"[focusable]"}),
    )
    .await;
    assert_eq!(out["total"], 2, "{out}");
    let out = ax(
        &daemon,
        "find",
        json!({"app": pid, "selector": "checkBox[!checked]"}),
    )
    .await;
    assert_eq!(out["total"], 1, "{out}");

    // A stale ref says it is gone once its app quits.
    let found = ax(
        &daemon,
        "find",
        json!({"app": pid, "selector": "button \"Say Hello\""}),
    )
    .await;
    let r = ref_of(found["matches"].as_str().unwrap(), "Say Hello");
    drop(app);
    let out = ax(&daemon, "read", json!({"ref": r})).await;
    assert_eq!(out["ok"], false);
    assert!(
        out["error"]["message"].as_str().unwrap().contains("gone"),
        "{out}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stopped_app_times_out_while_other_apps_keep_working() {
    let daemon = Daemon::start_on_desktop("");
    let stuck = TestApp::launch("Stuck App");
    let fine = TestApp::launch("Fine App");
    wait_tree(&daemon, stuck.pid()).await;
    wait_tree(&daemon, fine.pid()).await;

    // SAFETY: signals to our own child.
    unsafe { libc::kill(stuck.pid() as i32, libc::SIGSTOP) };
    let started = Instant::now();
    let (stuck_out, fine_out) = tokio::join!(
        ax(&daemon, "tree", json!({"app": stuck.pid()})),
        ax(&daemon, "tree", json!({"window": "window \"Fine App\""})),
    );
    let took = started.elapsed();
    unsafe { libc::kill(stuck.pid() as i32, libc::SIGCONT) };
    assert_eq!(stuck_out["ok"], false, "{stuck_out}");
    let message = stuck_out["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("has not answered") && message.contains(&stuck.pid().to_string()),
        "{message}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
    assert_eq!(fine_out["ok"], true, "{fine_out}");
    assert!(fine_out["tree"].as_str().unwrap().contains("Say Hello"));
    // Once it runs again, it answers again.
    wait_tree(&daemon, stuck.pid()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_wait_outlasts_an_app_that_is_busy_for_a_while() {
    let daemon = Daemon::start_on_desktop("");
    let busy = TestApp::launch("Busy App");
    wait_tree(&daemon, busy.pid()).await;
    // SAFETY: signals to our own child.
    unsafe { libc::kill(busy.pid() as i32, libc::SIGSTOP) };
    let wait = ax(
        &daemon,
        "wait",
        json!({"app": busy.pid(), "selector": "button \"Say Hello\"", "timeout_ms": 20000}),
    );
    let stopped_then_resumed = async {
        // Calls that find the app busy say so, and that it is sent nothing more meanwhile.
        let first = ax(&daemon, "tree", json!({"app": busy.pid()})).await;
        let second = ax(&daemon, "tree", json!({"app": busy.pid()})).await;
        unsafe { libc::kill(busy.pid() as i32, libc::SIGCONT) };
        (first, second)
    };
    let (waited, (first, second)) = tokio::join!(wait, stopped_then_resumed);
    for out in [&first, &second] {
        assert_eq!(out["ok"], false, "{out}");
        let message = out["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("has not answered") && message.contains("nothing else"),
            "{message}"
        );
    }
    // Busy is "not yet": the wait, begun while the app was stopped, ends met once it answers.
    assert_eq!(waited["ok"], true, "{waited}");
    assert_eq!(waited["met"], true, "{waited}");
    wait_tree(&daemon, busy.pid()).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn oversized_trees_are_cut_with_a_cursor_that_continues_exactly() {
    let daemon = Daemon::start_on_desktop("");
    let desktop = Desktop::shared();
    let _factory = desktop.launch("gtk3-widget-factory", &[]);
    let big = json!({"max_bytes": 1 << 20});
    let full_tree = || async {
        let out = ax_with(
            &daemon,
            "tree",
            json!({"app": "gtk3-widget-factory", "max_nodes": 5000}),
            json!({"return": big}),
        )
        .await;
        (out["ok"] == true && out["nodes"].as_u64().unwrap_or(0) > 150).then_some(out)
    };
    wait_for_async(full_tree).await;
    // Other suites' windows come and go on the shared desktop (the factory's `active` state
    // follows them), so the comparison counts only when the tree held still while paging.
    let mut attempts = 0;
    loop {
        attempts += 1;
        let before = wait_for_async(full_tree).await;
        assert!(before.get("truncated").is_none(), "{before}");
        let pages = paged_tree(&daemon, &big).await;
        let after = wait_for_async(full_tree).await;
        if before["revision"] != after["revision"] {
            assert!(attempts < 5, "the factory's tree never held still");
            continue;
        }
        let full_text = before["tree"].as_str().unwrap();
        // The tree may also change and change back between the two reads; only a mismatch that
        // persists across attempts is a paging error.
        if pages != full_text && attempts < 5 {
            continue;
        }
        if pages != full_text {
            let a: Vec<&str> = pages.lines().collect();
            let b: Vec<&str> = full_text.lines().collect();
            let at = a.iter().zip(&b).position(|(x, y)| x != y);
            panic!(
                "pages differ from the full tree at line {at:?} ({} vs {} lines): {:?} vs {:?}",
                a.len(),
                b.len(),
                at.map(|i| a[i]),
                at.map(|i| b[i])
            );
        }
        break;
    }

    // The default byte budget also ends pages on whole lines, never mid-line.
    let out = ax(&daemon, "tree", json!({"app": "gtk3-widget-factory"})).await;
    assert!(out.get("cut").is_none(), "{out}");
    assert_eq!(out["truncated"], true);
    assert!(out["tree"].as_str().unwrap().len() <= 4000);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_app_cache_and_the_node_by_node_walk_give_the_same_trees() {
    let desktop = Desktop::shared();
    let seeded = Daemon::start_on_desktop("");
    let walked = desktop.start_daemon_with("", &[("COMPUTER_AX_APP_CACHE", "off".into())]);
    let app = TestApp::launch_with("Cache Test", &["--more"]);
    let _factory = desktop.launch("gtk3-widget-factory", &[]);
    wait_tree(&seeded, app.pid()).await;
    let big = json!({"return": {"max_bytes": 1 << 20}});
    // Everything a node can show: the cache's part and what is fetched beside it.
    let every = json!(["states", "bounds", "actions", "value"]);
    let factory = json!({"app": "gtk3-widget-factory", "max_nodes": 5000, "include": every});
    wait_for_async(|| async {
        let out = ax_with(&seeded, "tree", factory.clone(), big.clone()).await;
        (out["ok"] == true && out["nodes"].as_u64().unwrap_or(0) > 150).then_some(())
    })
    .await;
    for args in [
        json!({"app": app.pid(), "max_nodes": 5000, "include": every}),
        json!({"app": app.pid(), "format": "json"}),
        factory,
        json!({"app": "gtk3-widget-factory", "max_nodes": 40, "depth": 6}),
    ] {
        // Windows of other suites come and go on the shared desktop (and with them `active`
        // and `focused` states): a comparison counts when the seeded tree held still around it.
        let mut attempts = 0;
        loop {
            attempts += 1;
            let before = ax_with(&seeded, "tree", args.clone(), big.clone()).await;
            let plain = ax_with(&walked, "tree", args.clone(), big.clone()).await;
            let after = ax_with(&seeded, "tree", args.clone(), big.clone()).await;
            assert_eq!(before["ok"], true, "{before}");
            assert_eq!(plain["ok"], true, "{plain}");
            if before["revision"] != after["revision"] || before["revision"] != plain["revision"] {
                if attempts < 5 {
                    continue;
                }
                let (a, b) = (
                    before["tree"].as_str().unwrap_or(""),
                    plain["tree"].as_str().unwrap_or(""),
                );
                let at = a.lines().zip(b.lines()).position(|(x, y)| x != y);
                panic!(
                    "{args}: seeded and walked trees differ at line {at:?}: {:?} vs {:?}",
                    at.and_then(|i| a.lines().nth(i)),
                    at.and_then(|i| b.lines().nth(i)),
                );
            }
            assert_eq!(before["tree"], plain["tree"]);
            assert_eq!(before["cursor"], plain["cursor"]);
            break;
        }
    }
}

/// Pages through the factory's tree 40 nodes at a time, checking each page's fields.
async fn paged_tree(daemon: &Daemon, budget: &Value) -> String {
    let mut pages = String::new();
    let mut cursor = Value::Null;
    let mut count = 0;
    loop {
        let mut args = json!({"app": "gtk3-widget-factory", "max_nodes": 40});
        if !cursor.is_null() {
            args["cursor"] = cursor.clone();
        }
        let out = ax_with(daemon, "tree", args, json!({"return": budget})).await;
        assert_eq!(out["ok"], true, "{out}");
        assert!(out["nodes"].as_u64().unwrap() <= 40);
        pages.push_str(out["tree"].as_str().unwrap());
        count += 1;
        cursor = out["cursor"].clone();
        if cursor.is_null() {
            assert!(out.get("truncated").is_none(), "{out}");
            break;
        }
        assert_eq!(out["truncated"], true);
        assert!(count < 100, "cursor never ended");
    }
    assert!(count > 3, "{count} pages");
    pages
}

async fn wait_for_async<T, F, Fut>(mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn the_documented_zenity_one_liner_presses_yes() {
    let daemon = Daemon::start_on_desktop("");
    let desktop = Desktop::shared();
    let mut zenity = desktop.launch("zenity", &["--question", "--text", "Proceed?"]);
    let out = wait_for("zenity's Yes button", Duration::from_secs(20), || {
        let out = daemon.cli(&[
            "call",
            "ax",
            "act",
            "--json",
            "--args",
            r#"{"app":"zenity","selector":"button \"Yes\"","action":"press"}"#,
        ]);
        let v = out.json();
        (v["ok"] == true).then_some(v)
    });
    assert_eq!(out["done"], true);
    let status = wait_for("zenity to exit", Duration::from_secs(10), || {
        zenity.0.try_wait().ok().flatten()
    });
    assert!(status.success(), "zenity answered {status} (Yes exits 0)");
    let _ = Command::new("true").status();
}

/// An `app` rule decides on the app the ax surface resolves, not on how the args spell it: a pid,
/// another case, or a ref with no app at all reach the same app and the same rule. Observing it
/// (not covered by the rule) still works, and receipts record the resolved target.
#[tokio::test(flavor = "multi_thread")]
async fn app_rules_decide_on_the_resolved_app_however_the_args_spell_it() {
    let app = TestApp::launch("Facts Test");
    let pid = app.pid();
    // The app's accessible name, from a daemon without rules.
    let name = {
        let daemon = Daemon::start_on_desktop("");
        wait_tree(&daemon, pid).await;
        let apps = ax(&daemon, "apps", json!({"format": "json"})).await;
        let apps: Value = serde_json::from_str(apps["apps"].as_str().unwrap()).unwrap();
        apps.as_array()
            .unwrap()
            .iter()
            .find(|a| a["pid"] == pid)
            .and_then(|a| a["name"].as_str())
            .expect("the test app is listed")
            .to_string()
    };
    let daemon = Daemon::start_on_desktop(&format!(
        "[defaults]\nact = \"allow\"\n[[rules]]\nsurface = \"ax\"\ncommand = \"act\"\napp = \"{name}\"\ndecision = \"deny\"\n"
    ));
    // Observing is not what the rule is about: it works, and shows the app to the surface.
    let tree = wait_tree(&daemon, pid).await;
    let button = ref_of(tree["tree"].as_str().unwrap(), "Say Hello");

    let press = |app_arg: Option<Value>, target: Value| {
        let mut args = json!({"action": "press"});
        if let Some(app_arg) = app_arg {
            args["app"] = app_arg;
        }
        for (k, v) in target.as_object().unwrap() {
            args[k] = v.clone();
        }
        args
    };
    for (how, args) in [
        (
            "by pid",
            press(
                Some(json!(pid)),
                json!({"selector": "button \"Say Hello\""}),
            ),
        ),
        (
            "in other case",
            press(
                Some(json!(name.to_uppercase())),
                json!({"selector": "button \"Say Hello\""}),
            ),
        ),
        ("by ref alone", press(None, json!({"ref": button}))),
    ] {
        let out = ax(&daemon, "act", args).await;
        assert_eq!(out["ok"], false, "{how}: {out}");
        assert_eq!(out["error"]["code"], "denied", "{how}: {out}");
        let intent = daemon.receipt_row(&out["receipt"], "intent");
        let target = &intent["body"]["facts"]["target"];
        assert_eq!(target["kind"], "element", "{how}: {intent}");
        assert_eq!(target["app"], json!(name), "{how}: {intent}");
        assert_eq!(target["resolved"], true, "{how}: {intent}");
        assert_eq!(
            intent["body"]["policy"]["rule"], "rules[0]",
            "{how}: {intent}"
        );
    }
    assert!(
        app.lines_starting("clicked").is_empty(),
        "a denied press reached the app"
    );
    let read = ax(&daemon, "read", json!({"ref": button})).await;
    assert_eq!(read["ok"], true, "{read}");
}
