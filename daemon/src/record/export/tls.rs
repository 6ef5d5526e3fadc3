//! The TLS client of the export sinks (`tcps://` syslog, `https://` OTLP): the system's root
//! certificates, and those of `[export] ca_file` for a team's own certificate authority.

use std::path::Path;
use std::sync::Arc;

use tokio_rustls::rustls::pki_types::CertificateDer;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::{self, RootCertStore};

/// The certificates of `ca_file`: an error, naming the file, when it cannot be read or holds
/// none (a sink that would trust less than its config says does not start).
pub fn ca_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|err| {
            format!(
                "[export] ca_file `{}` could not be read as PEM certificates: {err}",
                path.display()
            )
        })?;
    if certs.is_empty() {
        return Err(format!(
            "[export] ca_file `{}` holds no certificate (valid: a PEM file of one or more \
             `BEGIN CERTIFICATE` blocks)",
            path.display()
        ));
    }
    Ok(certs)
}

/// The client config for a sink that speaks TLS: every system root that loads, then each
/// certificate in `ca_file`.
pub fn client_config(ca_file: Option<&Path>) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = RootCertStore::empty();
    let system = rustls_native_certs::load_native_certs();
    for error in &system.errors {
        tracing::debug!(%error, "a system root certificate did not load");
    }
    let (_, _) = roots.add_parsable_certificates(system.certs);
    if let Some(path) = ca_file {
        for cert in ca_certificates(path)? {
            roots.add(cert).map_err(|err| {
                format!(
                    "[export] ca_file `{}` holds a certificate that cannot be a root: {err}",
                    path.display()
                )
            })?;
        }
    }
    // ring, not aws-lc-rs: it builds with a plain C compiler here and for macOS (see
    // packaging/check-macos.sh); its lack of post-quantum key exchange is what rustls flags.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| format!("TLS cannot be set up: {err}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}
