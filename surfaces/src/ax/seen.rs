//! Acts bound to what was seen (`complications.seen`) on the ax surface: an observation (tree,
//! find, read, focused) remembers each ref it handed out with the role and name it showed; an
//! act naming it is refused as `stale` when its element is gone, changed, or (through a
//! selector) is one the observation did not show.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use computer_ipc::ErrorCode;

use super::call::Target;
use crate::accessibility::backend::Failure;
use crate::kit::snapshot::Seen;

/// What one ax observation showed: each ref with its role and name then.
#[derive(Debug, Default)]
pub struct AxSnapshot {
    pub refs: HashMap<u32, Shown>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub role: String,
    pub name: String,
}

impl Shown {
    fn describe(&self, r: u32) -> String {
        format!("[{r}] {} {:?}", self.role, self.name)
    }
}

tokio::task_local! {
    /// The refs the observation running on this task hands out, as it renders them.
    static SHOWN: Arc<Mutex<AxSnapshot>>;
}

/// Notes a ref an observation shows, with its role and name (outside an observation nothing
/// is kept, nor `what` asked).
pub fn note(r: u32, what: impl FnOnce() -> (String, String)) {
    let _ = SHOWN.try_with(|shown| {
        let (role, name) = what();
        shown
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .refs
            .insert(r, Shown { role, name });
    });
}

/// Runs an observation, collecting the refs it shows.
pub async fn collecting<T>(work: impl std::future::Future<Output = T>) -> (T, AxSnapshot) {
    let shown = Arc::new(Mutex::new(AxSnapshot::default()));
    let result = SHOWN.scope(shown.clone(), work).await;
    let snapshot = std::mem::take(&mut *shown.lock().unwrap_or_else(|e| e.into_inner()));
    (result, snapshot)
}

fn stale(seen: &Seen<AxSnapshot>, what: String) -> Failure {
    Failure::Coded(
        ErrorCode::Stale,
        format!(
            "{what} since snapshot {}; look again (`ax find` or `ax tree`) and act on what it shows",
            seen.id
        ),
    )
}

/// Before the element is looked up: a ref must be one the observation showed.
pub fn check_named(seen: &Seen<AxSnapshot>, target: &Target) -> Result<(), Failure> {
    match target {
        Target::Ref(r) if !seen.value.refs.contains_key(r) => Err(Failure::Coded(
            ErrorCode::InvalidCall,
            format!(
                "ref [{r}] is not in snapshot {} (it showed {} refs): act on a ref that \
                 observation listed, or leave `seen` out",
                seen.id,
                seen.value.refs.len()
            ),
        )),
        _ => Ok(()),
    }
}

/// The failure of looking up a target bound to a snapshot, made `stale` when the ref's element
/// is gone (its window closed, its dialog replaced).
pub fn lookup_failed(seen: &Seen<AxSnapshot>, target: &Target, failure: Failure) -> Failure {
    let gone = matches!(
        failure,
        Failure::Coded(ErrorCode::NoMatch, _)
            | Failure::Ax(crate::accessibility::backend::AxError::Gone)
    );
    match (target, gone) {
        (Target::Ref(r), true) => {
            let was = seen
                .value
                .refs
                .get(r)
                .map_or(format!("[{r}]"), |s| s.describe(*r));
            stale(
                seen,
                format!("{was} is gone (its window closed or was replaced)"),
            )
        }
        _ => failure,
    }
}

/// Right before acting: the element found (ref `r`, with its role and name now) must be the one
/// the observation showed under that ref, as it showed it.
pub fn check_found(
    seen: &Seen<AxSnapshot>,
    target: &Target,
    r: u32,
    now: &Shown,
) -> Result<(), Failure> {
    match (seen.value.refs.get(&r), target) {
        (Some(was), _) if was == now => Ok(()),
        (Some(was), _) => Err(stale(
            seen,
            format!("{} is now {}", was.describe(r), now.describe(r)),
        )),
        (None, Target::Selector(selector)) => Err(stale(
            seen,
            format!(
                "`{}` now picks {}, which the observation did not show",
                selector.source,
                now.describe(r)
            ),
        )),
        // A ref not shown was refused before the lookup.
        (None, Target::Ref(_)) => Err(stale(seen, format!("{} was not shown", now.describe(r)))),
    }
}
