//! Which children of an object are read, and how. A child list is asked for whole only when the
//! object reports a sane number of children and does not manage its descendants; otherwise a
//! bounded page is read by index, with the object's selected children. What a toolkit reports is
//! untrusted input: LibreOffice Calc's sheet reports 2^31-1 children with MANAGES_DESCENDANTS,
//! and `GetChildren` on it makes soffice build an accessible per cell until it stops answering
//! and eats the machine's memory; asking it for its count or for one child by index answers in
//! milliseconds.

use std::time::Instant;

use futures::future::join_all;
use zbus::zvariant::OwnedObjectPath;

use super::bus::{self, ACCESSIBLE, BusError};
use crate::accessibility::roles::{State, StateSet};

/// More reported children than this and the list is never asked for whole.
pub const WHOLE_LIST_LIMIT: i32 = 1000;
/// Of an object that manages its descendants (GTK's tree views, web grids), at most this many
/// children are read by index: each may be made on demand, so they are asked one by one.
const MANAGED_PAGE: i32 = 200;
/// Of an object reporting more than [`WHOLE_LIST_LIMIT`] children (a spreadsheet's cells), this
/// many, by index, beside its selected children.
const HUGE_PAGE: i32 = 32;
/// Selected children read of an object whose list is paged (a whole sheet may be selected).
const SELECTED_LIMIT: i32 = 32;

const SELECTION: &str = "org.a11y.atspi.Selection";

/// How an object's children are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// `GetChildren`, all at once.
    Whole,
    /// The first `n` by index, then the selected ones.
    Page(i32),
}

/// How the children of an object with `states` reporting `count` children are read.
pub fn listing(states: StateSet, count: i32) -> Listing {
    if !(0..=WHOLE_LIST_LIMIT).contains(&count) {
        Listing::Page(HUGE_PAGE)
    } else if states.contains(State::ManagesDescendants) {
        Listing::Page(count.min(MANAGED_PAGE))
    } else {
        Listing::Whole
    }
}

/// The children read of one object: all of them, or a page of `count`.
#[derive(Debug, Default)]
pub struct Children {
    pub list: Vec<(String, String)>,
    /// Only part of the reported children are listed.
    pub partial: bool,
}

/// The children of the object at `dest`/`path`, read as [`listing`] decides for its `states`
/// and reported `count`.
pub async fn read(
    conn: &zbus::Connection,
    deadline: Instant,
    dest: &str,
    path: &str,
    states: StateSet,
    count: i32,
) -> Result<Children, BusError> {
    match listing(states, count) {
        Listing::Whole => Ok(Children {
            list: bus::children(conn, deadline, dest, path).await?,
            partial: false,
        }),
        Listing::Page(n) => {
            let (list, selected) = futures::join!(
                by_index(conn, deadline, dest, path, n),
                selected(conn, deadline, dest, path)
            );
            let mut list = list?;
            for child in selected? {
                if !list.contains(&child) {
                    list.push(child);
                }
            }
            Ok(Children {
                partial: (list.len() as i64) < i64::from(count) || count < 0,
                list,
            })
        }
    }
}

/// Children `0..n` by index, skipping any that are gone or odd; only a stuck app fails it.
async fn by_index(
    conn: &zbus::Connection,
    deadline: Instant,
    dest: &str,
    path: &str,
    n: i32,
) -> Result<Vec<(String, String)>, BusError> {
    let answers = join_all((0..n.max(0)).map(|i| child_at(conn, deadline, dest, path, i))).await;
    collect(answers, dest)
}

/// Child `i` of an object, as its app answers it (the null object included).
pub async fn child_at(
    conn: &zbus::Connection,
    deadline: Instant,
    dest: &str,
    path: &str,
    i: i32,
) -> Result<(String, OwnedObjectPath), BusError> {
    bus::call(
        conn,
        deadline,
        dest,
        path,
        ACCESSIBLE,
        "GetChildAtIndex",
        &(i,),
    )
    .await
}

/// The object's selected children (its `Selection`), at most [`SELECTED_LIMIT`]; none when it
/// has no such interface.
async fn selected(
    conn: &zbus::Connection,
    deadline: Instant,
    dest: &str,
    path: &str,
) -> Result<Vec<(String, String)>, BusError> {
    let count = match bus::property::<i32>(
        conn,
        deadline,
        dest,
        path,
        SELECTION,
        "NSelectedChildren",
    )
    .await
    {
        Ok(count) => count.clamp(0, SELECTED_LIMIT),
        Err(err @ (BusError::Timeout { .. } | BusError::Connect(_))) => return Err(err),
        Err(_) => return Ok(Vec::new()),
    };
    let answers = join_all((0..count).map(|i| async move {
        bus::call::<_, (String, OwnedObjectPath)>(
            conn,
            deadline,
            dest,
            path,
            SELECTION,
            "GetSelectedChild",
            &(i,),
        )
        .await
    }))
    .await;
    collect(answers, dest)
}

/// The children answered, in order; the null object and odd answers are skipped, a stuck app
/// or a broken bus fails the read.
fn collect(
    answers: Vec<Result<(String, OwnedObjectPath), BusError>>,
    dest: &str,
) -> Result<Vec<(String, String)>, BusError> {
    let mut list = Vec::new();
    for answer in answers {
        match answer {
            Ok((bus, path)) if path.as_str() != super::NULL_PATH => {
                let bus = if bus.is_empty() {
                    dest.to_string()
                } else {
                    bus
                };
                let child = (bus, path.as_str().to_string());
                if !list.contains(&child) {
                    list.push(child);
                }
            }
            Ok(_) => {}
            Err(err @ (BusError::Timeout { .. } | BusError::Connect(_))) => return Err(err),
            Err(_) => {}
        }
    }
    Ok(list)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn states(list: &[State]) -> StateSet {
        list.iter().copied().collect()
    }

    #[test]
    fn a_sane_list_is_read_whole_and_anything_else_by_page() {
        let plain = states(&[State::Showing]);
        let managed = states(&[State::ManagesDescendants]);
        assert_eq!(listing(plain, 0), Listing::Whole);
        assert_eq!(listing(plain, WHOLE_LIST_LIMIT), Listing::Whole);
        // The count Calc's sheet reports, with or without the state that says so.
        assert_eq!(listing(managed, i32::MAX), Listing::Page(HUGE_PAGE));
        assert_eq!(listing(plain, i32::MAX), Listing::Page(HUGE_PAGE));
        assert_eq!(
            listing(plain, WHOLE_LIST_LIMIT + 1),
            Listing::Page(HUGE_PAGE)
        );
        // A count a toolkit did not know (GTK3 answers -1 for some).
        assert_eq!(listing(plain, -1), Listing::Page(HUGE_PAGE));
        assert_eq!(listing(managed, 12), Listing::Page(12));
        assert_eq!(listing(managed, 900), Listing::Page(MANAGED_PAGE));
    }
}
