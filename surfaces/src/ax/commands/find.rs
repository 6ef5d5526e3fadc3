//! `ax find`: the elements a selector matches, each with its ref and where it sits, paged.

use computer_ipc::ToolError;
use serde::Deserialize;

use super::{Command, Preparing, Running};
use crate::accessibility::backend::{Backend, Failure, Include, said};
use crate::ax::call::{AppArg, Format, IncludePart, Page, fingerprint, in_app, page, parse_arg};
use crate::ax::lookup::{self, Ax, evaluate, scope_roots, unresponsive, walk_all};
use crate::ax::selector::Selector;
use crate::{Outcome, Risk};

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FindArgs {
    /// (role "Name"|~"part"|/re/ [state] :N, a > b)
    selector: String,
    #[serde(default)]
    app: Option<AppArg>,
    #[serde(default)]
    max_nodes: Option<usize>,
    #[serde(default)]
    include: Option<Vec<IncludePart>>,
    #[serde(default)]
    format: Option<Format>,
    #[serde(default)]
    cursor: Option<String>,
    #[serde(default)]
    since: Option<String>,
}

/// `ax find`, checked.
#[derive(Debug)]
pub struct Find {
    selector: Selector,
    app: Option<AppArg>,
    page: Page,
}

impl Command for Find {
    const NAME: &'static str = "find";
    const RISK: Risk = Risk::Observe;
    const FIELDS: &'static [&'static str] = &[
        "matches?",
        "revision",
        "nodes",
        "total",
        "cursor?",
        "truncated?",
        "unchanged?",
        "skipped?",
        "snapshot",
    ];
    const OBSERVES: bool = true;
    type Args = FindArgs;

    fn prepare(a: FindArgs, call: &mut Preparing<'_>) -> Result<Find, ToolError> {
        let selector = parse_arg(call.dialect, &a.selector, "args.selector")?;
        let fingerprint = fingerprint(&[&a.selector, &format!("{:?}{:?}", a.app, a.include)]);
        let page = page(
            a.max_nodes.or(Some(50)),
            a.include,
            a.format,
            a.cursor,
            a.since,
            call.max_bytes,
            fingerprint,
        )?;
        Ok(Find {
            selector,
            app: a.app,
            page,
        })
    }

    fn describe(&self) -> String {
        format!("find `{}`{}", self.selector.source, in_app(&self.app))
    }

    fn app(&self) -> Option<&AppArg> {
        self.app.as_ref()
    }

    async fn run<B: Backend>(self, ax: &Ax<B>, call: &Running<'_>) -> Result<Outcome, Failure> {
        let Find {
            selector,
            app,
            page,
        } = self;
        let deadline = call.deadline;
        let (roots, mut skipped) = scope_roots(ax, deadline, &app).await?;
        let include = Include {
            attributes: selector.needs_attributes(),
            ..page.include
        };
        let forest = walk_all(ax, deadline, &roots, include, Some(&selector)).await?;
        if app.is_some()
            && roots.len() == 1
            && let Some((key, after)) = forest.unresponsive.iter().next()
        {
            return Err(said(unresponsive(ax, key, *after)));
        }
        skipped.extend(
            forest
                .unresponsive
                .keys()
                .map(|key| ax.backend.describe_app(key)),
        );
        let hits = evaluate::<B>(&forest, &selector);
        let total = hits.len();
        Ok(lookup::paged(
            ax,
            &forest,
            &hits,
            &page,
            u32::MAX,
            false,
            "matches",
            skipped,
            Some(total),
        ))
    }
}
