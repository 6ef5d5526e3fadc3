//! What the gui surface reads back through AT-SPI around an act: the element under a screen
//! point (hit-tested down from the app's windows with `Component.GetAccessibleAtPoint`), one
//! element's role, name and states, and the text of the focused element of an app.

use std::time::Instant;

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
        for (bus, path) in bus::children(&conn, deadline, &app, ROOT_PATH).await? {
            let mut at = Accessible { bus, path };
            let inside: bool = bus::call(
                &conn,
                deadline,
                &at.bus,
                &at.path,
                COMPONENT,
                "Contains",
                &(x, y, SCREEN),
            )
            .await
            .unwrap_or(false);
            if !inside {
                continue;
            }
            for _ in 0..MAX_HIT_DEPTH {
                let hit: Result<(String, OwnedObjectPath), BusError> = bus::call(
                    &conn,
                    deadline,
                    &at.bus,
                    &at.path,
                    COMPONENT,
                    "GetAccessibleAtPoint",
                    &(x, y, SCREEN),
                )
                .await;
                let Ok((hit_bus, hit_path)) = hit else { break };
                let hit_bus = if hit_bus.is_empty() {
                    at.bus.clone()
                } else {
                    hit_bus
                };
                if hit_path.as_str() == NULL_PATH
                    || (hit_bus == at.bus && hit_path.as_str() == at.path)
                {
                    break;
                }
                at = Accessible {
                    bus: hit_bus,
                    path: hit_path.as_str().to_string(),
                };
            }
            return Ok(Some(at));
        }
        Ok(None)
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
