//! Tests of the shared command layer over a scripted in-memory backend: what every OS's ax gets
//! from it alone (one locate per action, the approver check before any action, refs that stay
//! put). The real backends are tested against real apps in the `ax` suite.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use accesskit::Role;
use async_trait::async_trait;
use computer_ipc::Complications;
use serde_json::{Map, Value, json};

use super::commands::{self, Running};
use super::lookup::{Ax, Refs};
use crate::accessibility::backend::{
    ActName, Acted, AppInfo, AxError, Backend, Contents, Dialect, Failure, Forest, NativeFacts,
    Node, WalkPlan, Window,
};
use crate::accessibility::roles::{State, StateSet, accesskit_role_names};
use crate::{Availability, Outcome, ProtectedProcesses};

/// One scripted element: id, parent, role, name, and its app's pid (`None`: the platform will
/// not say).
type Scripted = (u32, Option<u32>, Role, &'static str, Option<u32>);

/// Two apps: an editor (pid 100) and an approver's dialog (pid 200); a third whose pid is
/// unknown.
const DESKTOP: &[Scripted] = &[
    (1, None, Role::Application, "Editor", Some(100)),
    (2, Some(1), Role::Window, "Notes", Some(100)),
    (3, Some(2), Role::Button, "Save", Some(100)),
    (10, None, Role::Application, "Approver", Some(200)),
    (11, Some(10), Role::Dialog, "Allow the request?", Some(200)),
    (12, Some(11), Role::Button, "Yes", Some(200)),
    (20, None, Role::Application, "Mystery", None),
    (21, Some(20), Role::Window, "Mystery window", None),
    (22, Some(21), Role::Button, "Go", None),
];

#[derive(Debug, Clone, Default)]
struct FakeNative;

impl NativeFacts for FakeNative {
    fn native_role(&self) -> &str {
        ""
    }
}

#[derive(Default)]
struct Fake {
    walks: AtomicUsize,
    acted: Mutex<Vec<u32>>,
}

fn scripted(id: u32) -> &'static Scripted {
    DESKTOP
        .iter()
        .find(|s| s.0 == id)
        .expect("a scripted element")
}

fn node(id: u32, depth: u32, parent: Option<usize>) -> Node<u32, FakeNative> {
    let (_, _, role, name, _) = *scripted(id);
    let mut node = Node::pending(id, parent, depth);
    node.fetched = true;
    node.role = role;
    node.name = name.into();
    let mut states = StateSet::empty();
    states.insert(State::Enabled);
    node.states = states;
    node
}

#[async_trait]
impl Backend for Fake {
    type Element = u32;
    type Native = FakeNative;

    const NAME: &'static str = "scripted";
    const DIALECT: Dialect = Dialect {
        knows_role: |folded| accesskit_role_names().iter().any(|n| n == folded),
        other_role_names: "",
        until_examples: &[],
    };

    fn probe(&self) -> Availability {
        Availability::Ready
    }

    async fn ready(&self, _: Instant) -> Result<(), AxError> {
        Ok(())
    }

    async fn apps(&self, _: Instant, _: bool) -> Result<Vec<AppInfo<u32>>, AxError> {
        Ok(DESKTOP
            .iter()
            .filter(|s| s.1.is_none())
            .map(|&(id, _, _, name, pid)| AppInfo {
                element: id,
                key: name.into(),
                name: name.into(),
                pid,
                address: None,
                windows: vec![Window {
                    element: id + 1,
                    name: scripted(id + 1).3.into(),
                    active: id == 1,
                }],
                unresponsive: None,
            })
            .collect())
    }

    async fn walk(
        &self,
        roots: &[u32],
        _: Instant,
        _: &WalkPlan,
    ) -> Result<Forest<u32, FakeNative>, AxError> {
        self.walks.fetch_add(1, Ordering::SeqCst);
        let mut forest = Forest::new(&[]);
        let mut stack: Vec<(u32, u32, Option<usize>)> =
            roots.iter().rev().map(|&r| (r, 0, None)).collect();
        while let Some((id, depth, parent)) = stack.pop() {
            let index = forest.nodes.len();
            forest.nodes.push(node(id, depth, parent));
            match parent {
                Some(p) => forest.nodes[p].children.push(index),
                None => forest.roots.push(index),
            }
            for child in DESKTOP.iter().rev().filter(|s| s.1 == Some(id)) {
                stack.push((child.0, depth + 1, Some(index)));
            }
        }
        Ok(forest)
    }

    async fn read(
        &self,
        element: &u32,
        _: Instant,
    ) -> Result<Option<Node<u32, FakeNative>>, AxError> {
        Ok(Some(node(*element, 0, None)))
    }

    async fn contents(&self, _: &Node<u32, FakeNative>, _: Instant) -> Result<Contents, AxError> {
        Ok(Contents::default())
    }

    async fn focused(
        &self,
        _: &u32,
        _: Instant,
    ) -> Result<Option<(Forest<u32, FakeNative>, usize)>, AxError> {
        Ok(None)
    }

    async fn pid(&self, element: &u32, _: Instant) -> Option<u32> {
        scripted(*element).4
    }

    async fn act(
        &self,
        node: &Node<u32, FakeNative>,
        _: ActName,
        _: Option<Value>,
        _: &str,
        _: Instant,
    ) -> Result<Acted, Failure> {
        self.acted.lock().unwrap().push(node.element);
        Ok(Acted {
            done: true,
            via: None,
            value: None,
        })
    }

    fn describe_app(&self, key: &str) -> String {
        format!("app `{key}`")
    }
}

fn ax() -> Ax<Fake> {
    Ax {
        backend: Fake::default(),
        refs: Refs::default(),
    }
}

/// Runs one command as the surface would, with `protected` pids.
fn run(ax: &Ax<Fake>, command: &str, args: Value, protected: &[u32]) -> Result<Outcome, Failure> {
    let args: Map<String, Value> = serde_json::from_value(args).unwrap();
    let (job, _) = commands::prepare(&Fake::DIALECT, command, &args, &Complications::default())
        .expect("valid args");
    let set = Arc::new(ProtectedProcesses::default());
    let _held = set.protect(protected.to_vec());
    let deadline = Instant::now() + Duration::from_secs(5);
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(job.run(
            ax,
            &Running {
                deadline,
                protected: &set,
                seen: None,
                keys: None,
            },
        ))
}

fn refused(result: Result<Outcome, Failure>) -> String {
    match result {
        Err(Failure::Refused(message)) => message,
        Err(other) => panic!("not refused: {other:?}"),
        Ok(outcome) => panic!("not refused, it ran: {:?}", outcome.fields),
    }
}

#[test]
fn an_action_locates_its_target_once_and_acts_on_it() {
    let ax = ax();
    let done = run(
        &ax,
        "act",
        json!({"selector": "button \"Save\"", "action": "press"}),
        &[],
    )
    .expect("press Save");
    assert!(done.success, "{:?}", done.fields);
    assert_eq!(done.fields["done"], true);
    // One walk resolved the selector; the approver check and the action reused what it found.
    assert_eq!(ax.backend.walks.load(Ordering::SeqCst), 1);
    assert_eq!(*ax.backend.acted.lock().unwrap(), [3]);
}

#[test]
fn an_approvers_widgets_are_refused_by_selector_and_by_ref_while_others_still_work() {
    let ax = ax();
    // The hostile agent presses the approval dialog's Yes button, by selector...
    let message = refused(run(
        &ax,
        "act",
        json!({"selector": "button \"Yes\"", "action": "press"}),
        &[200],
    ));
    assert!(message.contains("pid 200"), "{message}");
    // ... and by the ref a harmless `find` handed out (reading is allowed).
    let found = run(&ax, "find", json!({"selector": "button \"Yes\""}), &[200])
        .expect("finding the dialog's button is allowed");
    assert_eq!(found.fields["total"], 1);
    let r = ax.refs.get(&12);
    let message = refused(run(
        &ax,
        "act",
        json!({"ref": r, "action": "press"}),
        &[200],
    ));
    assert!(message.contains("approver"), "{message}");
    // An app whose pid the platform will not give is refused too while approvers are connected.
    let message = refused(run(
        &ax,
        "act",
        json!({"selector": "button \"Go\"", "action": "press"}),
        &[200],
    ));
    assert!(message.contains("pid unknown"), "{message}");
    assert!(ax.backend.acted.lock().unwrap().is_empty(), "an action ran");
    // The ordinary call beside them still works.
    let done = run(
        &ax,
        "act",
        json!({"selector": "button \"Save\"", "action": "press"}),
        &[200],
    )
    .expect("press Save");
    assert!(done.success);
    assert_eq!(*ax.backend.acted.lock().unwrap(), [3]);
    // With no approver connected, the unknown-pid app may be acted on.
    run(
        &ax,
        "act",
        json!({"selector": "button \"Go\"", "action": "press"}),
        &[],
    )
    .expect("press Go");
}

#[test]
fn refs_stay_put_across_calls_and_a_bare_tree_shows_the_active_window() {
    let ax = ax();
    let tree = run(&ax, "tree", json!({}), &[]).expect("tree");
    let text = String::from_utf8(tree.texts[0].head.clone()).unwrap();
    assert!(text.starts_with("[1] window \"Notes\""), "{text}");
    assert!(text.contains("\n  [2] button \"Save\""), "{text}");
    let found = run(&ax, "find", json!({"selector": "button \"Save\""}), &[]).expect("find");
    let matches = String::from_utf8(found.texts[0].head.clone()).unwrap();
    assert!(
        matches.starts_with("[2] button \"Save\" in window \"Notes\""),
        "{matches}"
    );
}
