//! What the gui surface reads back through AT-SPI around an act: the element under a screen
//! point (hit-tested down from the app's windows with `Component.GetAccessibleAtPoint`), one
//! element's role, name and states, and the text of the focused element of an app.

use std::time::Instant;

use futures::future::join_all;

use zbus::zvariant::OwnedObjectPath;

use super::NULL_PATH;
use super::bus::{self, BusError};
use super::walk::text_of;
use super::{Accessible, Atspi};
use crate::accessibility::backend::{Backend, Include, WalkPlan};
use crate::accessibility::read_back::ElementView;
use crate::accessibility::roles::{State, StateSet};

const COMPONENT: &str = "org.a11y.atspi.Component";
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
    /// the accessibility bus and one of its windows holds the point, and how it reads (its
    /// role, name and states; `None` when that read failed).
    ///
    /// The answer is the one a descent level by level gives (`GetAccessibleAtPoint` on the
    /// window, then on what it answered, until nothing deeper answers), but asked speculatively.
    /// What the app's last hit test found is asked again all at once: the app's windows, which
    /// of them holds the point, every level of the path it took and how its element reads. When
    /// the answers show that all of it still holds, that was one round trip to the app. Where
    /// they differ, the test goes on from the first answer that did (the windows asked again,
    /// the descent a level at a time from where the path parts, the element read), so a guess
    /// that no longer holds costs the calls that find out, never a wrong answer.
    pub async fn element_at(
        &self,
        pid: u32,
        (x, y): (i32, i32),
        deadline: Instant,
    ) -> Result<Option<(Accessible, Option<ElementView>)>, BusError> {
        let Some(app) = self.app_of(pid, deadline).await? else {
            return Ok(None);
        };
        let conn = self.conn(deadline).await?;
        let point = (x, y, SCREEN);
        let contains = |windows: Vec<(String, String)>| {
            let conn = conn.clone();
            async move {
                let inside = join_all(windows.iter().map(|(bus, path)| {
                    bus::call::<_, bool>(&conn, deadline, bus, path, COMPONENT, "Contains", &point)
                }))
                .await;
                // The first window that holds the point, in the app's order.
                windows
                    .into_iter()
                    .zip(inside)
                    .find_map(|(window, inside)| inside.unwrap_or(false).then_some(window))
            }
        };
        let root = self.bus.root_of(&app);
        let guess = self.hit_paths.last_of(&app);
        let (windows, guessed) = match &guess {
            Some(guess) => {
                let levels = guess.levels();
                let hit = levels.last().cloned();
                let (windows, window, answers, view) = futures::join!(
                    bus::children(&conn, deadline, &app, &root),
                    contains(guess.windows.clone()),
                    join_all(
                        levels
                            .iter()
                            .map(|level| hit_below(&conn, deadline, level, (x, y)))
                    ),
                    async {
                        match &hit {
                            Some(hit) => self.view(hit, deadline).await.ok().flatten(),
                            None => None,
                        }
                    },
                );
                let windows = windows?;
                // The guessed answers stand only for the windows they were asked of.
                let holds = windows == guess.windows;
                (windows, holds.then_some((window, answers, view)))
            }
            None => (bus::children(&conn, deadline, &app, &root).await?, None),
        };
        let (window, mut answered) = match guessed {
            Some((window, answers, view)) => (window, Some((answers, view))),
            None => (contains(windows.clone()).await, None),
        };
        let Some((bus, path)) = window else {
            return Ok(None);
        };
        let window = Accessible { bus, path };
        // The guess asked the levels below the window it last hit in; for another window, the
        // path last taken in that one is asked now.
        let (mut levels, answers, guessed_view) = match (answered.take(), &guess) {
            (Some((answers, view)), Some(guess)) if guess.window == window => {
                (guess.levels(), answers, view)
            }
            _ => {
                let mut levels = vec![window.clone()];
                levels.extend(self.hit_paths.below(&window));
                let answers = join_all(
                    levels
                        .iter()
                        .map(|level| hit_below(&conn, deadline, level, (x, y))),
                )
                .await;
                (levels, answers, None)
            }
        };
        let guessed_hit = levels.last().cloned();
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
        let Some(hit) = levels.last().cloned() else {
            return Ok(None);
        };
        let view = match guessed_view {
            Some(view) if guessed_hit.as_ref() == Some(&hit) => Some(view),
            _ => self.view(&hit, deadline).await.ok().flatten(),
        };
        self.hit_paths
            .remember(&app, windows, window, levels.split_off(1));
        Ok(Some((hit, view)))
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
        for (bus, path) in bus::children(&conn, deadline, &app, &self.bus.root_of(&app)).await? {
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
        let read = text_of(&conn, deadline, &at.bus, &at.path, Some(TEXT_LIMIT)).await;
        if let Err(err) = &read {
            tracing::debug!(path = %at.path, ?err, "focused field's text not read back");
        }
        read
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

/// The path each window's last hit test took below it, and each app's windows and the window
/// its last hit test was in, for the next one to ask at once. Only a guess: every part of it is
/// asked again, so a guess that no longer holds costs the calls that find where it parts, never
/// a wrong answer.
#[derive(Default)]
pub(super) struct HitPaths(std::sync::Mutex<Kept>);

#[derive(Default)]
struct Kept {
    below: std::collections::HashMap<Accessible, Vec<Accessible>>,
    apps: std::collections::HashMap<String, LastHit>,
}

/// An app's windows and its last hit test's path, as that test found them.
#[derive(Clone)]
pub(super) struct LastHit {
    windows: Vec<(String, String)>,
    window: Accessible,
    below: Vec<Accessible>,
}

impl LastHit {
    /// The window, then each level below it.
    fn levels(&self) -> Vec<Accessible> {
        std::iter::once(self.window.clone())
            .chain(self.below.iter().cloned())
            .collect()
    }
}

/// Windows (and apps) whose last path is kept; past it, the oldest are forgotten (all at once).
const HIT_PATHS_KEPT: usize = 64;

impl HitPaths {
    fn below(&self, window: &Accessible) -> Vec<Accessible> {
        let kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.below.get(window).cloned().unwrap_or_default()
    }

    fn last_of(&self, app: &str) -> Option<LastHit> {
        let kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        kept.apps.get(app).cloned()
    }

    fn remember(
        &self,
        app: &str,
        windows: Vec<(String, String)>,
        window: Accessible,
        below: Vec<Accessible>,
    ) {
        let mut kept = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if kept.below.len() >= HIT_PATHS_KEPT && !kept.below.contains_key(&window) {
            kept.below.clear();
        }
        if kept.apps.len() >= HIT_PATHS_KEPT && !kept.apps.contains_key(app) {
            kept.apps.clear();
        }
        kept.below.insert(window.clone(), below.clone());
        kept.apps.insert(
            app.to_string(),
            LastHit {
                windows,
                window,
                below,
            },
        );
    }
}
