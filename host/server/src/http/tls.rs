//! TLS for the HTTP API: the certificate chain and key read from PEM files, rustls (ring) configs offering HTTP/2 and HTTP/1.1 by ALPN, swapped whole on reload.
//!
//! A reload (SIGHUP in `ebb serve`) reads both files again and replaces the
//! configs only when they load; a bad pair keeps the one in force, so a
//! renewal gone wrong never takes the listener down. Connections keep the
//! config they were accepted with.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::crypto::ring;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// ALPN protocol id of HTTP/2.
pub const ALPN_H2: &[u8] = b"h2";
/// ALPN protocol id of HTTP/1.1.
pub const ALPN_HTTP1: &[u8] = b"http/1.1";

/// Loading the certificate or key failed.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {}: {error}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        error: std::io::Error,
    },
    /// The certificate file holds no PEM certificate, or one that does not parse.
    #[error(
        "{} holds no PEM certificate (`-----BEGIN CERTIFICATE-----`){detail}; give --tls-cert the server's certificate chain, leaf first",
        path.display()
    )]
    NoCertificate {
        /// The file.
        path: PathBuf,
        /// What the parser said, if it failed.
        detail: String,
    },
    /// The key file holds no PEM private key.
    #[error(
        "{} holds no PEM private key (PKCS#8, PKCS#1 or SEC1){detail}; give --tls-key the certificate's private key",
        path.display()
    )]
    NoKey {
        /// The file.
        path: PathBuf,
        /// What the parser said, if it failed.
        detail: String,
    },
    /// rustls refused the pair (e.g. the key does not match the certificate).
    #[error("the certificate and key do not make a TLS config: {0}")]
    Config(String),
}

/// The TLS settings of a listener: where the files are and the configs
/// made from them.
pub struct Tls {
    cert: PathBuf,
    key: PathBuf,
    configs: RwLock<Configs>,
}

/// One loaded certificate and key.
#[derive(Clone)]
struct Configs {
    /// Offers `h2` and `http/1.1`.
    serve: Arc<ServerConfig>,
    /// Offers only `http/1.1`: for answering a connection over the cap
    /// with a plain 503 before closing it.
    refuse: Arc<ServerConfig>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl Tls {
    /// Load the chain in `cert` and the key in `key` (both PEM).
    pub fn load(cert: &Path, key: &Path) -> Result<Self, TlsError> {
        let configs = configs(cert, key)?;
        Ok(Self {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            configs: RwLock::new(configs),
        })
    }

    /// Read both files again; on success new connections use them, on
    /// failure the config in force stays. Blocking file I/O: call it off
    /// the async workers.
    pub fn reload(&self) -> Result<(), TlsError> {
        let configs = configs(&self.cert, &self.key)?;
        *self.configs.write() = configs;
        Ok(())
    }

    /// The acceptor for a connection within the cap.
    pub fn acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.configs.read().serve.clone())
    }

    /// The acceptor for a connection answered 503 and closed: HTTP/1.1 only.
    pub fn refusal_acceptor(&self) -> TlsAcceptor {
        TlsAcceptor::from(self.configs.read().refuse.clone())
    }

    /// The certificate file.
    pub fn cert_path(&self) -> &Path {
        &self.cert
    }
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|error| TlsError::Read {
        path: path.to_path_buf(),
        error,
    })
}

fn configs(cert_path: &Path, key_path: &Path) -> Result<Configs, TlsError> {
    let pem = read(cert_path)?;
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::NoCertificate {
            path: cert_path.to_path_buf(),
            detail: format!(" ({e})"),
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            path: cert_path.to_path_buf(),
            detail: String::new(),
        });
    }
    let pem = read(key_path)?;
    let key = PrivateKeyDer::from_pem_slice(&pem).map_err(|e| TlsError::NoKey {
        path: key_path.to_path_buf(),
        detail: match e {
            tokio_rustls::rustls::pki_types::pem::Error::NoItemsFound => String::new(),
            other => format!(" ({other})"),
        },
    })?;
    let config = |alpn: &[&[u8]]| -> Result<Arc<ServerConfig>, TlsError> {
        let mut config = ServerConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsError::Config(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(certs.clone(), key.clone_key())
            .map_err(|e| TlsError::Config(e.to_string()))?;
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(Arc::new(config))
    };
    Ok(Configs {
        serve: config(&[ALPN_H2, ALPN_HTTP1])?,
        refuse: config(&[ALPN_HTTP1])?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(dir: &Path) -> (PathBuf, PathBuf) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let (cert_path, key_path) = (dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        (cert_path, key_path)
    }

    #[test]
    fn a_generated_pair_loads_offering_h2_then_http1() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = pair(dir.path());
        let tls = Tls::load(&cert, &key).unwrap();
        assert_eq!(
            tls.configs.read().serve.alpn_protocols,
            vec![b"h2".to_vec(), b"http/1.1".to_vec()]
        );
        assert_eq!(
            tls.configs.read().refuse.alpn_protocols,
            vec![b"http/1.1".to_vec()]
        );
    }

    #[test]
    fn bad_files_are_named_and_a_bad_reload_keeps_the_config_in_force() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = pair(dir.path());
        let missing = dir.path().join("missing.pem");
        let error = Tls::load(&missing, &key).unwrap_err();
        assert!(matches!(error, TlsError::Read { .. }), "{error}");
        assert!(error.to_string().contains("missing.pem"), "{error}");
        // The key where the certificate belongs, and the other way round.
        let error = Tls::load(&key, &key).unwrap_err();
        assert!(matches!(error, TlsError::NoCertificate { .. }), "{error}");
        let error = Tls::load(&cert, &cert).unwrap_err();
        assert!(matches!(error, TlsError::NoKey { .. }), "{error}");
        // A key of another certificate.
        let other = dir.path().join("other");
        std::fs::create_dir(&other).unwrap();
        let (_, other_key) = pair(&other);
        let error = Tls::load(&cert, &other_key).unwrap_err();
        assert!(matches!(error, TlsError::Config(_)), "{error}");

        let tls = Tls::load(&cert, &key).unwrap();
        let before = tls.configs.read().serve.clone();
        std::fs::write(&cert, "not a certificate").unwrap();
        assert!(tls.reload().is_err());
        assert!(Arc::ptr_eq(&before, &tls.configs.read().serve));
        pair(dir.path());
        tls.reload().unwrap();
        assert!(!Arc::ptr_eq(&before, &tls.configs.read().serve));
    }
}
