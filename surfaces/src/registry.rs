//! The per-OS factory: which surface backends this machine gets, with the choice logged. Each
//! surface is one line of [`Registry::for_this_platform`].

use std::collections::BTreeMap;
use std::sync::Arc;

use computer_ipc::SurfaceName;

use crate::shell::{ShellLimits, ShellSurface};
use crate::{ArtifactQuota, Availability, EvidenceCapture, SectionError, Surface};

/// Limits the surfaces enforce, from the daemon's config.
#[derive(Debug, Clone, Default)]
pub struct SurfaceLimits {
    pub shell: ShellLimits,
}

/// The surfaces built for this platform, whether or not each is usable right now.
pub struct Registry {
    surfaces: Vec<Arc<dyn Surface>>,
    evidence: Option<Arc<dyn EvidenceCapture>>,
    artifact_quota: Arc<ArtifactQuota>,
    /// The person's shell, from which a desktop of an agent's own makes its own (same limits
    /// and terminal sessions).
    shell: Option<Arc<ShellSurface>>,
}

impl Registry {
    /// Builds the backends for this OS and logs which were chosen and whether each is ready.
    pub fn for_this_platform(limits: &SurfaceLimits) -> Registry {
        // One line per surface.
        let shell = Arc::new(ShellSurface::new(limits.shell.clone()));
        let mut surfaces: Vec<Arc<dyn Surface>> = vec![shell.clone()];
        let gui = crate::gui::surface();
        surfaces.extend(gui.clone());
        #[cfg(any(target_os = "linux", target_os = "macos"))]
        surfaces.extend(crate::ax::surface(gui.map(crate::ax::Keyboard::over)));
        #[cfg(target_os = "macos")]
        surfaces.push(Arc::new(crate::applescript::AppleScriptSurface::new(
            limits.shell.clone(),
        )));
        surfaces.push(Arc::new(crate::keychain::KeychainSurface::new()));
        let evidence = crate::gui::evidence();
        for surface in &surfaces {
            match surface.probe() {
                Availability::Ready => {
                    tracing::info!(surface = %surface.name(), backend = surface.backend(), "surface ready")
                }
                Availability::Unavailable { reason, fix } => {
                    tracing::warn!(surface = %surface.name(), backend = surface.backend(), %reason, %fix, "surface unavailable")
                }
            }
        }
        Registry {
            surfaces,
            evidence,
            artifact_quota: Arc::new(ArtifactQuota::unlimited()),
            shell: Some(shell),
        }
    }

    /// Hands each surface its config section (`sections`, by surface name; a surface without
    /// one keeps its defaults). A section a surface refuses, or one for a surface this build
    /// lacks, is an error naming the key.
    pub fn configure(
        &self,
        sections: &BTreeMap<SurfaceName, toml::Table>,
    ) -> Result<(), SectionError> {
        for (name, section) in sections {
            match self.get(*name) {
                Some(surface) => surface.configure(section)?,
                None if section.is_empty() => {}
                None => {
                    return Err(SectionError {
                        surface: *name,
                        key: section.keys().next().cloned().unwrap_or_default(),
                        message: format!("this build has no {name} surface to take it"),
                    });
                }
            }
        }
        Ok(())
    }

    /// Every call's artifacts from now on share `quota` (unlimited until this is called).
    pub fn with_artifact_quota(mut self, quota: Arc<ArtifactQuota>) -> Registry {
        self.artifact_quota = quota;
        self
    }

    /// The quota handed to every call in its [`crate::CallContext`].
    pub fn artifact_quota(&self) -> &Arc<ArtifactQuota> {
        &self.artifact_quota
    }

    /// A registry of exactly these surfaces (for tests of the pipeline).
    pub fn from_surfaces(surfaces: Vec<Arc<dyn Surface>>) -> Registry {
        Registry {
            surfaces,
            evidence: None,
            artifact_quota: Arc::new(ArtifactQuota::unlimited()),
            shell: None,
        }
    }

    /// The evidence capturer, when this machine can take screenshots now.
    /// The person's shell surface as built here (`None` in a registry made for tests).
    pub fn shell(&self) -> Option<&Arc<ShellSurface>> {
        self.shell.as_ref()
    }

    pub fn evidence(&self) -> Option<&Arc<dyn EvidenceCapture>> {
        self.evidence.as_ref()
    }

    pub fn get(&self, name: SurfaceName) -> Option<&Arc<dyn Surface>> {
        self.surfaces.iter().find(|surface| surface.name() == name)
    }

    pub fn all(&self) -> &[Arc<dyn Surface>] {
        &self.surfaces
    }

    /// The surfaces usable here and now: what `tools/list` offers.
    pub fn ready(&self) -> impl Iterator<Item = &Arc<dyn Surface>> {
        self.surfaces
            .iter()
            .filter(|surface| surface.probe() == Availability::Ready)
    }

    /// Why a surface that is not in this registry is missing, in words a person can act on.
    pub fn why_absent(name: SurfaceName) -> Availability {
        let (reason, fix) = match name {
            SurfaceName::Applescript if !cfg!(target_os = "macos") => (
                "AppleScript exists only on macOS".to_string(),
                "use the shell, ax or gui surface on this platform".to_string(),
            ),
            _ => (
                format!("the {name} surface is not part of this build yet"),
                "use the shell surface; see README.md for the surfaces on the way".to_string(),
            ),
        };
        Availability::Unavailable { reason, fix }
    }
}
