//! `ax tree`: the accessibility tree of a window (the active one unless `window` or `app` says
//! otherwise) as an outline with refs, paged.

use computer_ipc::ToolError;
use serde::Deserialize;

use super::{Command, Preparing, Running};
use crate::accessibility::backend::{Backend, Failure, UNLIMITED_DEPTH, WalkPlan, said};
use crate::accessibility::roles::fold;
use crate::ax::call::{
    AppArg, Format, IncludePart, Page, RefArg, Target, fingerprint, in_app, page, target_of,
};
use crate::ax::lookup::{self, Ax, active_window, locate, scope_roots, unresponsive};
use crate::{Outcome, Risk};

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TreeArgs {
    #[serde(default)]
    app: Option<AppArg>,
    /// selector|ref
    #[serde(default)]
    window: Option<RefArg>,
    #[serde(default)]
    depth: Option<u32>,
    /// =500
    #[serde(default)]
    max_nodes: Option<usize>,
    #[serde(default)]
    roles: Option<Vec<String>>,
    #[serde(default)]
    include: Option<Vec<IncludePart>>,
    #[serde(default)]
    format: Option<Format>,
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    since: Option<String>,
}

/// `ax tree`, checked.
#[derive(Debug)]
pub struct Tree {
    app: Option<AppArg>,
    window: Option<Target>,
    page: Page,
    roles: Option<Vec<String>>,
    depth: Option<u32>,
}

impl Command for Tree {
    const NAME: &'static str = "tree";
    const RISK: Risk = Risk::Observe;
    const FIELDS: &'static [&'static str] = &[
        "tree?",
        "revision",
        "nodes",
        "cursor?",
        "truncated?",
        "unchanged?",
        "skipped?",
        "snapshot",
    ];
    const OBSERVES: bool = true;
    type Args = TreeArgs;

    fn prepare(a: TreeArgs, call: &mut Preparing<'_>) -> Result<Tree, ToolError> {
        let dialect = call.dialect;
        let window = a
            .window
            .map(|w| target_of(dialect, Some(w), None, "args.window"))
            .transpose()?;
        let roles = a
            .roles
            .map(|roles| {
                roles
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        let folded = fold(r);
                        if (dialect.knows_role)(&folded) {
                            Ok(folded)
                        } else {
                            Err(ToolError::invalid(format!(
                                "unknown role `{r}`; use accesskit role names as `ax tree` prints them (button, checkBox, textInput, ...){}",
                                dialect.other_role_names
                            ))
                            .at(format!("args.roles[{i}]")))
                        }
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .transpose()?;
        let fingerprint = fingerprint(&[
            &format!("{:?}", a.app),
            &format!("{window:?}"),
            &format!("{:?}{roles:?}{:?}", a.depth, a.include),
        ]);
        let page = page(
            a.max_nodes,
            a.include,
            a.format,
            a.cursor,
            a.since,
            call.max_bytes,
            fingerprint,
        )?;
        Ok(Tree {
            app: a.app,
            window,
            page,
            roles,
            depth: a.depth,
        })
    }

    fn describe(&self) -> String {
        match &self.window {
            Some(w) => format!(
                "read the accessibility tree of window {}{}",
                w.describe(),
                in_app(&self.app)
            ),
            None if self.app.is_some() => {
                format!("read the accessibility tree{}", in_app(&self.app))
            }
            None => "read the accessibility tree of the active window".into(),
        }
    }

    fn app(&self) -> Option<&AppArg> {
        self.app.as_ref()
    }

    fn window(&self) -> Option<&Target> {
        self.window.as_ref()
    }

    async fn run<B: Backend>(self, ax: &Ax<B>, call: &Running<'_>) -> Result<Outcome, Failure> {
        let Tree {
            app,
            window,
            page,
            roles,
            depth,
        } = self;
        let deadline = call.deadline;
        let (roots, skipped) = match (&window, &app) {
            (Some(target), _) => (vec![locate(ax, deadline, target, &app).await?], vec![]),
            (None, Some(_)) => scope_roots(ax, deadline, &app).await?,
            (None, None) => (vec![active_window(ax, deadline, &app).await?], vec![]),
        };
        let plan = WalkPlan {
            max_depth: depth.unwrap_or(UNLIMITED_DEPTH),
            include: page.include,
            attribute_keys: Vec::new(),
            // One node past the page tells whether there is more.
            need: Some(page.offset + page.max_nodes + 1),
            roles: roles.map(|r| r.into_iter().collect()),
            showing_only: false,
        };
        let forest = ax.backend.walk(&roots, deadline, &plan).await?;
        if roots.len() == 1
            && let Some((app, after)) = forest.unresponsive.iter().next()
        {
            return Err(said(unresponsive(ax, app, *after)));
        }
        let order: Vec<usize> = forest
            .preorder(plan.max_depth)
            .into_iter()
            .filter(|&i| plan.emits(&forest.nodes[i]))
            .collect();
        let skipped = skipped
            .into_iter()
            .chain(
                forest
                    .unresponsive
                    .keys()
                    .map(|app| ax.backend.describe_app(app)),
            )
            .collect();
        Ok(lookup::paged(
            ax,
            &forest,
            &order,
            &page,
            plan.max_depth,
            true,
            "tree",
            skipped,
            None,
        ))
    }
}
