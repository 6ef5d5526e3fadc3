//! An app's own AT-SPI cache (`org.a11y.atspi.Cache.GetItems`): role, name, description, states,
//! interfaces and child count of every node the app has cached, in one call, so a walk asks the
//! app only for what the cache lacks. Which parents' child lists it can be trusted for is decided
//! here; the walk asks `GetChildren` for the others.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ::atspi::Role as AtspiRole;
use futures::future::join_all;
use zbus::zvariant::OwnedObjectPath;

use super::bus::{self, Bus, BusError, ROOT_PATH, Support};
use super::children::Listing;
use super::roles::state_set;
use crate::accessibility::roles::StateSet;

pub const CACHE_PATH: &str = "/org/a11y/atspi/cache";
const CACHE_IFACE: &str = "org.a11y.atspi.Cache";
/// `(so)(so)(so)iiassusau`: object, app, parent, index in parent, child count, interfaces,
/// name, role, description, states (at-spi2-core ≥ 2.x bridges, GTK4, Qt6).
const ITEM_SIGNATURE: &str = "a((so)(so)(so)iiassusau)";
/// `(so)(so)(so)a(so)assusau`: the older form with the children listed (Qt5, old bridges).
const LEGACY_SIGNATURE: &str = "a((so)(so)(so)a(so)assusau)";
/// How many child lists the cache lacks are asked for up front, concurrently.
const PREFETCH: usize = 256;
/// How long an app whose cache could not be used is walked without asking again.
const RETRY_AFTER: Duration = Duration::from_secs(60);

type Ref = (String, OwnedObjectPath);
type Item = (
    Ref,
    Ref,
    Ref,
    i32,
    i32,
    Vec<String>,
    String,
    u32,
    String,
    Vec<u32>,
);
type LegacyItem = (
    Ref,
    Ref,
    Ref,
    Vec<Ref>,
    Vec<String>,
    String,
    u32,
    String,
    Vec<u32>,
);

/// What the cache knows of one node.
#[derive(Debug, Clone)]
pub struct CachedNode {
    pub atspi_role: AtspiRole,
    pub name: String,
    pub description: String,
    pub states: StateSet,
    /// `None` when the app did not say (GTK3 gives -1 for menus and for tables, which manage
    /// their descendants and keep them out of the cache).
    pub child_count: Option<i32>,
    pub interfaces: Vec<String>,
    /// The children's paths in order, when the cache holds exactly the children the app reports.
    pub children: Option<Vec<String>>,
}

/// One app's cache, by object path.
#[derive(Debug, Default)]
pub struct AppCache {
    pub nodes: HashMap<String, CachedNode>,
}

impl AppCache {
    pub fn get(&self, path: &str) -> Option<&CachedNode> {
        self.nodes.get(path)
    }

    /// Builds the table from `GetItems` items: a parent's child list is trusted only when every
    /// child it reports is cached with a distinct index in `0..count` (GTK3 lists some children
    /// under parents whose own child list does not contain them, with index -1).
    fn from_items(bus_name: &str, items: Vec<Item>) -> AppCache {
        let mut claims: HashMap<String, Vec<(i32, String)>> = HashMap::new();
        let mut nodes = HashMap::with_capacity(items.len());
        for (object, _app, parent, index, count, interfaces, name, role, description, states) in
            items
        {
            let path = object.1.as_str().to_string();
            if parent.0 == bus_name {
                claims
                    .entry(parent.1.as_str().to_string())
                    .or_default()
                    .push((index, path.clone()));
            }
            nodes.insert(
                path,
                CachedNode {
                    atspi_role: AtspiRole::try_from(role).unwrap_or(AtspiRole::Unknown),
                    name,
                    description,
                    states: state_set(&states),
                    child_count: (count >= 0).then_some(count),
                    interfaces,
                    children: None,
                },
            );
        }
        for (path, node) in nodes.iter_mut() {
            let Some(count) = node.child_count else {
                continue;
            };
            let mut kids = claims.remove(path).unwrap_or_default();
            if kids.len() != count as usize {
                continue;
            }
            kids.sort_by_key(|(index, _)| *index);
            if kids
                .iter()
                .enumerate()
                .all(|(n, (index, _))| n as i32 == *index)
            {
                node.children = Some(kids.into_iter().map(|(_, path)| path).collect());
            }
        }
        AppCache { nodes }
    }

    fn from_legacy(items: Vec<LegacyItem>) -> AppCache {
        let nodes = items
            .into_iter()
            .map(
                |(object, _app, _parent, children, interfaces, name, role, description, states)| {
                    let kids: Vec<String> = children
                        .iter()
                        .map(|(_, path)| path.as_str().to_string())
                        .collect();
                    let node = CachedNode {
                        atspi_role: AtspiRole::try_from(role).unwrap_or(AtspiRole::Unknown),
                        name,
                        description,
                        states: state_set(&states),
                        child_count: Some(kids.len() as i32),
                        interfaces,
                        // Children on another bus (embedded plugs) are left to the walk.
                        children: children
                            .iter()
                            .all(|(bus, _)| *bus == object.0)
                            .then_some(kids),
                    };
                    (object.1.as_str().to_string(), node)
                },
            )
            .collect();
        AppCache { nodes }
    }
}

/// The cache of the app at `bus_name`, or `None` when the walk must do without it. Bridges
/// (at-spi2-atk) register the cache object only once a client has shown itself, which
/// `GetApplicationBusAddress` does (every libatspi client calls it), so a first "unknown method"
/// is answered by that and one retry. A timeout is returned: the app is not answering. `whole`
/// says the walk will cover much of the app, so the child lists the cache lacks are worth asking
/// for up front.
pub async fn load(
    ax_bus: &Bus,
    conn: &zbus::Connection,
    deadline: Instant,
    bus_name: &str,
    whole: bool,
) -> Result<Option<Arc<AppCache>>, BusError> {
    if !ax_bus.use_app_caches {
        return Ok(None);
    }
    let known = ax_bus.cache_support(bus_name);
    if let Some(Support::Missing(at)) = known
        && at.elapsed() < RETRY_AFTER
    {
        return Ok(None);
    }
    let mut result = get_items(conn, deadline, bus_name).await;
    if matches!(result, Err(BusError::Gone)) && known.is_none() {
        let _: Result<String, _> = bus::call(
            conn,
            deadline,
            bus_name,
            ROOT_PATH,
            "org.a11y.atspi.Application",
            "GetApplicationBusAddress",
            &(),
        )
        .await;
        result = get_items(conn, deadline, bus_name).await;
    }
    if let (Ok(cache), true) = (&mut result, whole) {
        complete_child_lists(conn, deadline, bus_name, cache).await?;
    }
    match result {
        Ok(cache) => {
            tracing::debug!(
                bus = bus_name,
                nodes = cache.nodes.len(),
                "app cache loaded"
            );
            ax_bus.set_cache_support(bus_name, Support::Works);
            Ok(Some(Arc::new(cache)))
        }
        Err(err @ BusError::Timeout { .. }) => {
            // A frozen app, or one whose cache is too big to send in time: either way the next
            // call walks it node by node, each call under its own limit.
            ax_bus.set_cache_support(bus_name, Support::Missing(Instant::now()));
            Err(err)
        }
        Err(err @ BusError::Connect(_)) => Err(err),
        Err(err) => {
            tracing::debug!(
                bus = bus_name,
                ?err,
                "no usable AT-SPI cache; walking instead"
            );
            ax_bus.set_cache_support(bus_name, Support::Missing(Instant::now()));
            Ok(None)
        }
    }
}

/// Asks, all at once, for the child lists the cache cannot vouch for (GTK3: menus, tables,
/// parents of stray children), so that a walk of the whole tree does not spend one round trip
/// per tree level on them. At most [`PREFETCH`] lists; the walk asks for any others itself.
async fn complete_child_lists(
    conn: &zbus::Connection,
    deadline: Instant,
    bus_name: &str,
    cache: &mut AppCache,
) -> Result<(), BusError> {
    let wanted: Vec<String> = cache
        .nodes
        .iter()
        // Never the list of an object whose children may not be asked for whole (a sheet that
        // reports 2^31-1 cells): the walk reads a page of those.
        .filter(|(_, node)| {
            node.children.is_none()
                && node.child_count.is_some_and(|count| {
                    count > 0 && super::children::listing(node.states, count) == Listing::Whole
                })
        })
        .map(|(path, _)| path.clone())
        .take(PREFETCH)
        .collect();
    let lists = join_all(
        wanted
            .iter()
            .map(|path| bus::children(conn, deadline, bus_name, path)),
    )
    .await;
    for (path, list) in wanted.iter().zip(lists) {
        match list {
            // Children on another bus (embedded plugs) are left to the walk.
            Ok(kids) if kids.iter().all(|(bus, _)| bus == bus_name) => {
                if let Some(node) = cache.nodes.get_mut(path) {
                    node.child_count.get_or_insert(kids.len() as i32);
                    node.children = Some(kids.into_iter().map(|(_, p)| p).collect());
                }
            }
            Err(err @ BusError::Timeout { .. }) | Err(err @ BusError::Connect(_)) => {
                return Err(err);
            }
            // Gone meanwhile, or odd: the walk asks again and reports what it finds.
            _ => {}
        }
    }
    Ok(())
}

async fn get_items(
    conn: &zbus::Connection,
    deadline: Instant,
    bus_name: &str,
) -> Result<AppCache, BusError> {
    let reply = bus::call_message(
        conn,
        deadline,
        bus_name,
        CACHE_PATH,
        CACHE_IFACE,
        "GetItems",
        &(),
    )
    .await?;
    let body = reply.body();
    let signature = body.signature().to_string();
    let odd = |err: zbus::Error| BusError::Other(format!("Cache.GetItems answered oddly: {err}"));
    match signature.as_str() {
        ITEM_SIGNATURE => Ok(AppCache::from_items(
            bus_name,
            body.deserialize::<Vec<Item>>().map_err(odd)?,
        )),
        LEGACY_SIGNATURE => Ok(AppCache::from_legacy(
            body.deserialize::<Vec<LegacyItem>>().map_err(odd)?,
        )),
        other => Err(BusError::Other(format!(
            "Cache.GetItems answered with signature {other}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(path: &str, parent: &str, index: i32, count: i32) -> Item {
        let r = |p: &str| (":1.5".to_string(), OwnedObjectPath::try_from(p).unwrap());
        (
            r(path),
            r("/r"),
            r(parent),
            index,
            count,
            vec!["org.a11y.atspi.Accessible".into()],
            path.trim_start_matches('/').into(),
            43,
            String::new(),
            vec![1 << 8, 0],
        )
    }

    #[test]
    fn child_lists_are_trusted_only_when_complete_and_indexed() {
        let cache = AppCache::from_items(
            ":1.5",
            vec![
                item("/r", "/", -1, 2),
                item("/b", "/r", 1, 0),
                item("/a", "/r", 0, 1),
                // /a says it has one child; the cache holds one that claims /a without an index.
                item("/stray", "/a", -1, 0),
                // /m does not know its count (GTK3 menus): never trusted.
                item("/m", "/b", -1, -1),
            ],
        );
        assert_eq!(
            cache.get("/r").unwrap().children,
            Some(vec!["/a".to_string(), "/b".to_string()])
        );
        assert_eq!(cache.get("/a").unwrap().children, None);
        // /b claims no children but has a stray claimant: its count (0) differs.
        assert_eq!(cache.get("/b").unwrap().children, None);
        assert_eq!(cache.get("/stray").unwrap().children, Some(vec![]));
        assert_eq!(cache.get("/m").unwrap().child_count, None);
        assert_eq!(cache.get("/m").unwrap().children, None);
        assert_eq!(cache.get("/a").unwrap().name, "a");
    }
}
