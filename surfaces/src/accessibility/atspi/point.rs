//! What the gui surface reads back through AT-SPI around an act: the element under a screen
//! point (hit-tested down from the app's windows with `Component.GetAccessibleAtPoint`), one
//! element's role, name and states, and the text of the focused element of an app.

use std::time::Instant;

use futures::future::join_all;

use zbus::zvariant::OwnedObjectPath;

use super::bus::{self, BusError, ROOT_PATH};
use super::walk::text_of;
use super::{Accessible, Atspi};
use crate::accessibility::backend::{Backend, Include, WalkPlan};
use crate::accessibility::read_back::ElementView;
use crate::accessibility::roles::{State, StateSet};

const COMPONENT: &str = "org.a11y.atspi.Component";
/// The path AT-SPI answers for "no object".
const NULL_PATH: &str = "/org/a11y/atspi/null";
/// Screen coordinates (`ATSPI_COORD_TYPE_SCREEN`).
const SCREEN: u32 = 0;
/// Deepest hit test: toolkits nest a widget a dozen levels down at most.
const MAX_HIT_DEPTH: usize = 32;
/// Longest text read back from a focused field.
const TEXT_LIMIT: i32 = 16 * 1024;

impl Atspi {
    /// The bus name of the app with process `pid`, from the apps already seen or, failing that,
    /// a fresh listing.
    async fn app_of(&self, pid: u32, deadline: Instant) -> Result<Option<String>, BusError> {
        if let Some((bus, ..)) = self
            .bus
            .known_apps()
            .into_iter()
            .find(|(_, _, p)| *p == Some(pid))
        {
            return Ok(Some(bus));
        }
        let conn = self.conn(deadline).await?;
        let apps = self.list_apps(&conn, deadline).await?;
        Ok(apps
            .into_iter()
            .find(|app| app.pid == Some(pid))
            .map(|app| app.key))
    }

    /// The deepest element of app `pid`'s windows at screen point (`x`, `y`), if the app is on
    /// the accessibility bus and one of its windows holds the point.
    ///
    /// The answer is the one a descent level by level gives (`GetAccessibleAtPoint` on the
    /// window, then on what it answered, until nothing deeper answers), but asked speculatively:
    /// every level of the path last hit in that window is asked at once, and the answers show
    /// how far that path still holds at this point. Where one differs, the descent goes on from
    /// that answer, a level at a time. Each call costs a round trip to the app; a repeated or
    /// nearby click pays about one instead of one a level.
    pub async fn element_at(
        &self,
        pid: u32,
        (x, y): (i32, i32),
        deadline: Instant,
    ) -> Result<Option<Accessible>, BusError> {
        let Some(app) = self.app_of(pid, deadline).await? else {
            return Ok(None);
        };
        let conn = self.conn(deadline).await?;
        let windows = bus::children(&conn, deadline, &app, ROOT_PATH).await?;
        let point = (x, y, SCREEN);
        let inside = join_all(windows.iter().map(|(bus, path)| {
            bus::call::<_, bool>(&conn, deadline, bus, path, COMPONENT, "Contains", &point)
        }))
        .await;
        // The first window that holds the point, in the app's order.
        let Some((bus, path)) = windows
            .into_iter()
            .zip(inside)
            .find_map(|(window, inside)| inside.unwrap_or(false).then_some(window))
        else {
            return Ok(None);
        };
        let window = Accessible { bus, path };
        let mut levels = vec![window.clone()];
        levels.extend(self.hit_paths.below(&window));
        let answers = join_all(
            levels
                .iter()
                .map(|level| hit_below(&conn, deadline, level, (x, y))),
        )
        .await;
        // Walk the answers while they follow the path asked; `next` is where they leave it.
        let mut depth = 0;
        let mut next = None;
        for (i, answer) in answers.into_iter().enumerate() {
            depth = i;
            match answer {
                None => break,
                Some(deeper) if levels.get(i + 1) == Some(&deeper) => continue,
                Some(deeper) => {
                    next = Some(deeper);
                    break;
                }
            }
        }
        levels.truncate(depth + 1);
        if let Some(mut at) = next {
            loop {
                levels.push(at.clone());
                if levels.len() > MAX_HIT_DEPTH {
                    break;
                }
                match hit_below(&conn, deadline, &at, (x, y)).await {
                    Some(deeper) => at = deeper,
                    None => break,
                }
            }
        }
        let hit = levels.last().cloned();
        self.hit_paths.remember(window, levels.split_off(1));
        Ok(hit)
    }

    /// One element's states alone (one call); `None` when it is gone.
    pub async fn states(
        &self,
        at: &Accessible,
        deadline: Instant,
    ) -> Result<Option<StateSet>, BusError> {
        let conn = self.conn(deadline).await?;
        match bus::states(&conn, deadline, &at.bus, &at.path).await {
            Ok(states) => Ok(Some(states)),
            Err(BusError::Gone) => Ok(None),
            Err(err) => Err(err),
        }
    }

    /// One element's role, name and states; `None` when it is gone.
    pub async fn view(
        &self,
        at: &Accessible,
        deadline: Instant,
    ) -> Result<Option<ElementView>, BusError> {
        let conn = self.conn(deadline).await?;
        let mut walker = super::walk::Walker::new(std::slice::from_ref(at));
        let plan = WalkPlan {
            max_depth: 0,
            include: Include {
                states: true,
                ..Include::default()
            },
            ..WalkPlan::default()
        };
        walker.walk(&conn, deadline, &plan).await?;
        let node = &walker.forest.nodes[0];
        Ok((!node.gone && node.fetched).then(|| ElementView {
            role: node.role,
            name: node.name.clone(),
            states: node.states,
            value: node.value.clone(),
        }))
    }

    /// The element with the keyboard focus in app `pid`'s active window, and its text, when it
    /// has a text.
    pub async fn focused_text(
        &self,
        pid: u32,
        deadline: Instant,
    ) -> Result<Option<(Accessible, String)>, BusError> {
        let Some(app) = self.app_of(pid, deadline).await? else {
            return Ok(None);
        };
        let conn = self.conn(deadline).await?;
        for (bus, path) in bus::children(&conn, deadline, &app, ROOT_PATH).await? {
            let window = Accessible { bus, path };
            let states = bus::states(&conn, deadline, &window.bus, &window.path).await?;
            if !states.contains(State::Active) {
                continue;
            }
            let Some((forest, i)) = self
                .focused(&window, deadline)
                .await
                .map_err(|err| BusError::Other(format!("{err:?}")))?
            else {
                return Ok(None);
            };
            let node = &forest.nodes[i];
            // An element without a text answers that it has no such interface.
            return match text_of(
                &conn,
                deadline,
                &node.element.bus,
                &node.element.path,
                Some(TEXT_LIMIT),
            )
            .await
            {
                Ok(text) => Ok(Some((node.element.clone(), text))),
                Err(BusError::Gone) => Ok(None),
                Err(err) => Err(err),
            };
        }
        Ok(None)
    }

    /// The text of an element read before (its field after the act).
    pub async fn text(&self, at: &Accessible, deadline: Instant) -> Result<String, BusError> {
        let conn = self.conn(deadline).await?;
        text_of(&conn, deadline, &at.bus, &at.path, Some(TEXT_LIMIT)).await
    }
}

/// What `at` answers is at screen point (`x`, `y`) below it: `None` when nothing deeper is (it
/// answers the null object or itself) or it cannot say.
async fn hit_below(
    conn: &zbus::Connection,
    deadline: Instant,
    at: &Accessible,
    (x, y): (i32, i32),
) -> Option<Accessible> {
    let (bus, path): (String, OwnedObjectPath) = bus::call(
        conn,
        deadline,
        &at.bus,
        &at.path,
        COMPONENT,
        "GetAccessibleAtPoint",
        &(x, y, SCREEN),
    )
    .await
    .ok()?;
    let bus = if bus.is_empty() { at.bus.clone() } else { bus };
    let deeper = Accessible {
        bus,
        path: path.as_str().to_string(),
    };
    (deeper.path != NULL_PATH && deeper != *at).then_some(deeper)
}

/// The path each window's last hit test took below it, for the next one to ask at once. Only
/// a guess: every level is asked again, so a path that no longer holds costs the calls that
/// find where it parts, never a wrong answer.
#[derive(Default)]
pub(super) struct HitPaths(
    std::sync::Mutex<std::collections::HashMap<Accessible, Vec<Accessible>>>,
);

/// Windows whose last path is kept; past it, the oldest are forgotten (all at once).
const HIT_PATHS_KEPT: usize = 64;

impl HitPaths {
    fn below(&self, window: &Accessible) -> Vec<Accessible> {
        let paths = self.0.lock().unwrap_or_else(|e| e.into_inner());
        paths.get(window).cloned().unwrap_or_default()
    }

    fn remember(&self, window: Accessible, path: Vec<Accessible>) {
        let mut paths = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if paths.len() >= HIT_PATHS_KEPT && !paths.contains_key(&window) {
            paths.clear();
        }
        paths.insert(window, path);
    }
}
