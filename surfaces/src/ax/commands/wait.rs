//! `ax wait`: polls until a selector's element appears, disappears or is in a state, within
//! the wait's own bound; timed out, says what was found instead.

use std::time::{Duration, Instant};

use computer_ipc::{ErrorCode, ToolError};
use serde::Deserialize;
use serde_json::{Map, json};

use super::{Command, Preparing, Running};
use crate::accessibility::backend::{AxError, Backend, Failure, ForestOf, Include};
use crate::accessibility::roles::{self, all_states};
use crate::ax::call::{AppArg, in_app, parse_arg};
use crate::ax::lookup::{
    Ax, evaluate, node_line, scope_roots, similar_nodes, unresponsive, walk_all, where_is,
};
use crate::ax::selector::Selector;
use crate::{Outcome, Risk};

const DEFAULT_WAIT: Duration = Duration::from_secs(5);
const MAX_WAIT: Duration = Duration::from_secs(60);

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitArgs {
    selector: String,
    #[serde(default)]
    app: Option<AppArg>,
    /// appears|disappears|[!]state
    #[serde(default)]
    until: Option<String>,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

/// What `wait` waits for.
#[derive(Debug, Clone, Copy)]
pub enum Until {
    Appears,
    Disappears,
    State {
        query: roles::StateQuery,
        negated: bool,
    },
}

/// `ax wait`, checked.
#[derive(Debug)]
pub struct Wait {
    selector: Selector,
    app: Option<AppArg>,
    until: Until,
    timeout: Duration,
}

impl Command for Wait {
    const NAME: &'static str = "wait";
    const RISK: Risk = Risk::Observe;
    const FIELDS: &'static [&'static str] = &[
        "met",
        "waited_ms",
        "ref?",
        "node?",
        "found?",
        "states?",
        "value?",
        "nearest?",
    ];
    type Args = WaitArgs;

    fn prepare(a: WaitArgs, call: &mut Preparing<'_>) -> Result<Wait, ToolError> {
        let dialect = call.dialect;
        let selector = parse_arg(dialect, &a.selector, "args.selector")?;
        let until = match a.until.as_deref().unwrap_or("appears") {
            "appears" => Until::Appears,
            "disappears" => Until::Disappears,
            other => {
                let (negated, name) = match other.strip_prefix('!') {
                    Some(rest) => (true, rest),
                    None => (false, other),
                };
                match roles::parse_state(name) {
                    Some(query) => Until::State { query, negated },
                    None => {
                        return Err(ToolError::invalid(format!(
                            "`until` is appears, disappears, a state (focused, checked, ...) or !state; got `{other}`"
                        ))
                        .at("args.until")
                        .valid(dialect.until_examples.iter().copied()));
                    }
                }
            }
        };
        let wait = match a.timeout_ms {
            Some(0) => {
                return Err(
                    ToolError::invalid("timeout_ms must be at least 1").at("args.timeout_ms")
                );
            }
            Some(ms) if Duration::from_millis(ms) > MAX_WAIT => {
                return Err(ToolError::invalid(format!(
                    "timeout_ms is at most {} ms",
                    MAX_WAIT.as_millis()
                ))
                .at("args.timeout_ms"));
            }
            Some(ms) => Duration::from_millis(ms),
            None => DEFAULT_WAIT,
        };
        // The wait's own bound must fit inside the call's deadline.
        let overall = call.timeout.unwrap_or(wait + Duration::from_secs(3));
        call.timeout = Some(overall);
        Ok(Wait {
            selector,
            app: a.app,
            until,
            timeout: wait.min(overall),
        })
    }

    fn describe(&self) -> String {
        format!(
            "wait up to {} ms until `{}` {:?}{}",
            self.timeout.as_millis(),
            self.selector.source,
            self.until,
            in_app(&self.app)
        )
    }

    fn app(&self) -> Option<&AppArg> {
        self.app.as_ref()
    }

    async fn run<B: Backend>(self, ax: &Ax<B>, call: &Running<'_>) -> Result<Outcome, Failure> {
        let Wait {
            selector,
            app,
            until,
            timeout,
        } = self;
        let deadline = call.deadline;
        let started = Instant::now();
        let give_up = (started + timeout).min(deadline);
        let include = Include {
            attributes: selector.needs_attributes(),
            ..Include::default()
        };
        let mut pause = Duration::from_millis(40);
        loop {
            // Each poll is bounded by what is left of the wait (an app stuck mid-poll ends it).
            let poll_deadline = give_up
                .max(Instant::now() + Duration::from_millis(200))
                .min(deadline);
            let seen = match scope_roots(ax, poll_deadline, &app).await {
                Ok((roots, _)) => {
                    match walk_all(ax, poll_deadline, &roots, include, Some(&selector)).await {
                        // A busy app (opening a dialog, say) is "not yet" until the wait's end.
                        Err(AxError::Timeout { app: key, after }) => Seen::NoApp {
                            met: false,
                            why: unresponsive(ax, &key, after),
                        },
                        Err(err) => return Err(err.into()),
                        Ok(forest) => {
                            let hits = evaluate::<B>(&forest, &selector);
                            // An app that did not answer may still hold the element.
                            let all_answered = forest.unresponsive.is_empty();
                            let met = match until {
                                Until::Appears => !hits.is_empty(),
                                Until::Disappears => hits.is_empty() && all_answered,
                                Until::State { query, negated } => hits.first().is_some_and(|&i| {
                                    query.holds(forest.nodes[i].states) != negated
                                }),
                            };
                            Seen::Walked { met, forest, hits }
                        }
                    }
                }
                // An app that is not there yet is what `appears` waits for.
                Err(Failure::Coded(ErrorCode::NoMatch, why)) if app.is_some() => Seen::NoApp {
                    met: matches!(until, Until::Disappears),
                    why,
                },
                // The app named is there but busy: not yet, whatever the wait is for.
                Err(Failure::Said(why)) if app.is_some() => Seen::NoApp { met: false, why },
                Err(err) => return Err(err),
            };
            let met = match &seen {
                Seen::Walked { met, .. } | Seen::NoApp { met, .. } => *met,
            };
            if met || Instant::now() + pause >= give_up {
                let waited_ms = started.elapsed().as_millis() as u64;
                return Ok(wait_outcome(ax, &selector, until, seen, waited_ms));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 3 / 2).min(Duration::from_millis(250));
        }
    }
}

/// What the last poll of a wait saw.
enum Seen<B: Backend> {
    Walked {
        met: bool,
        forest: ForestOf<B>,
        hits: Vec<usize>,
    },
    /// The app named is not on the bus (or not answering): why, in words.
    NoApp { met: bool, why: String },
}

/// A wait's reply. Met: the element, if there is one. Timed out: what was found instead, so the
/// caller can tell a wrong selector from a slow app: the element as it is now (its states and
/// value) when it is there in another state, how many still match when it did not go, the nearest
/// names when nothing matches, or that the app is not there.
fn wait_outcome<B: Backend>(
    ax: &Ax<B>,
    selector: &Selector,
    until: Until,
    seen: Seen<B>,
    waited_ms: u64,
) -> Outcome {
    let mut fields = Map::new();
    let met = match seen {
        Seen::NoApp { met, why } => {
            if !met {
                fields.insert("found".into(), json!(why));
            }
            met
        }
        Seen::Walked { met, forest, hits } => {
            let first = hits.first().map(|&i| &forest.nodes[i]);
            if let Some(node) = first {
                // The ref is what the next call (or step) acts on.
                fields.insert("ref".into(), json!(ax.refs.get(&node.element)));
                fields.insert(
                    "node".into(),
                    json!(node_line(ax, node, Include::default())),
                );
            }
            if !met {
                let found = match (until, first) {
                    (Until::State { .. }, Some(node)) => {
                        fields.insert("states".into(), json!(all_states(node.states)));
                        if let Some(value) = &node.value {
                            fields.insert("value".into(), json!(value));
                        }
                        format!(
                            "`{}` is there, in another state ({})",
                            selector.source,
                            all_states(node.states).join(", ")
                        )
                    }
                    (Until::Disappears, Some(_)) => {
                        format!(
                            "`{}` still matches {} element(s)",
                            selector.source,
                            hits.len()
                        )
                    }
                    _ => {
                        let nearest: Vec<String> = similar_nodes::<B>(&forest, selector, 5)
                            .into_iter()
                            .map(|i| {
                                node_line(ax, &forest.nodes[i], Include::default())
                                    + &where_is::<B>(&forest, i)
                            })
                            .collect();
                        let found = if nearest.is_empty() {
                            format!(
                                "nothing matches `{}`, nor any similar name ({} elements searched)",
                                selector.source,
                                forest.nodes.len()
                            )
                        } else {
                            format!("nothing matches `{}`; nearest names below", selector.source)
                        };
                        if !nearest.is_empty() {
                            fields.insert("nearest".into(), json!(nearest));
                        }
                        found
                    }
                };
                fields.insert("found".into(), json!(found));
            }
            met
        }
    };
    fields.insert("met".into(), json!(met));
    fields.insert("waited_ms".into(), json!(waited_ms));
    Outcome {
        success: met,
        fields,
        ..Outcome::default()
    }
}
