//! Agents and their tokens: `computer agents add|list|remove`, stored as sha256 digests in the
//! state dir (0600), compared in constant time. A caller without a token is the `default` agent
//! with every surface; a token narrows the caller to its agent's surfaces.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use computer_ipc::SurfaceName;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// One agent profile as stored.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Agent {
    pub name: String,
    /// sha256 of the token, hex. The token itself is printed once and never stored.
    pub token_sha256: String,
    /// The surfaces this agent may use; `None` means all.
    pub surfaces: Option<Vec<SurfaceName>>,
    pub created_ms: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
pub struct AgentStore {
    pub agents: Vec<Agent>,
}

pub fn store_path(state_dir: &Path) -> PathBuf {
    state_dir.join("agents.json")
}

impl AgentStore {
    pub fn load(path: &Path) -> Result<AgentStore, String> {
        match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|err| format!("{} is not a valid agent store: {err}", path.display())),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(AgentStore::default()),
            Err(err) => Err(format!("cannot read {}: {err}", path.display())),
        }
    }

    /// Writes the store atomically with mode 0600.
    pub fn save(&self, path: &Path) -> Result<(), String> {
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o600)
            .open(&tmp)
            .map_err(|err| format!("cannot write {}: {err}", tmp.display()))?;
        std::io::Write::write_all(&mut file, text.as_bytes()).map_err(|e| e.to_string())?;
        file.sync_all().map_err(|e| e.to_string())?;
        std::fs::rename(&tmp, path)
            .map_err(|err| format!("cannot replace {}: {err}", path.display()))
    }

    /// The agent whose token this is.
    pub fn authenticate(&self, token: &str) -> Option<&Agent> {
        let presented: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        // Every stored digest is compared in full, so timing says nothing about which one (or how
        // much of one) matched.
        let mut found = None;
        for agent in &self.agents {
            let Ok(stored) = hex::decode(&agent.token_sha256) else {
                continue;
            };
            if stored.len() == 32 && constant_time_eq(&stored, &presented) {
                found = Some(agent);
            }
        }
        found
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A new random token: `ct_` and 64 hex digits from the kernel's random source.
pub fn mint_token() -> Result<String, String> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|err| format!("cannot read /dev/urandom: {err}"))?;
    Ok(format!("ct_{}", hex::encode(bytes)))
}

pub fn token_digest(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

/// Checks an agent name: lower-case letters, digits, `-` and `_`; not `default`.
pub fn check_name(name: &str) -> Result<(), String> {
    if name == "default" {
        return Err(
            "`default` is the profile of callers without a token; pick another name".into(),
        );
    }
    let valid = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if valid {
        Ok(())
    } else {
        Err(format!(
            "`{name}` is not a valid agent name: use a-z, 0-9, - and _ (at most 64)"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_authenticate_only_their_agent() {
        let token = mint_token().unwrap();
        assert!(token.starts_with("ct_") && token.len() == 67);
        let store = AgentStore {
            agents: vec![Agent {
                name: "ci".into(),
                token_sha256: token_digest(&token),
                surfaces: Some(vec![SurfaceName::Shell]),
                created_ms: 0,
            }],
        };
        assert_eq!(store.authenticate(&token).unwrap().name, "ci");
        assert!(store.authenticate("ct_wrong").is_none());
        assert!(store.authenticate("").is_none());
    }

    #[test]
    fn store_round_trips_with_private_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = store_path(dir.path());
        let mut store = AgentStore::load(&path).unwrap();
        store.agents.push(Agent {
            name: "a".into(),
            token_sha256: token_digest("t"),
            surfaces: None,
            created_ms: 1,
        });
        store.save(&path).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(AgentStore::load(&path).unwrap().agents, store.agents);
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("ci-bot_2").is_ok());
        assert!(check_name("default").is_err());
        assert!(check_name("Bad Name").is_err());
    }
}
