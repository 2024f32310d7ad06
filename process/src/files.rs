//! A certificate, its key and a CA bundle, read from PEM files, checked when
//! read, and watched for changes.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};
use tracing::{info, warn};

use crate::Error;

/// Where the certificate, its key and the CA bundle are, and which flag
/// named each (for error messages).
#[derive(Debug, Clone)]
pub struct PemFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
    /// The flag that names the CA file (`--client-ca` or `--manager-ca`).
    pub ca_flag: &'static str,
}

/// The contents of [`PemFiles`], each checked to hold what it should.
#[derive(Clone, PartialEq, Eq)]
pub struct Pem {
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
    pub ca: Vec<u8>,
}

impl std::fmt::Debug for Pem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pem({})", self.fingerprint())
    }
}

impl PemFiles {
    /// Reads all three files; an error names the flag, the file and what is wrong.
    pub fn read(&self) -> Result<Pem, Error> {
        let pem = Pem {
            cert: read(&self.cert, "--tls-cert")?,
            key: read(&self.key, "--tls-key")?,
            ca: read(&self.ca, self.ca_flag)?,
        };
        certificates(&pem.cert).map_err(|message| Error::Pem {
            flag: "--tls-cert",
            path: self.cert.clone(),
            message,
        })?;
        private_key(&pem.key).map_err(|message| Error::Pem {
            flag: "--tls-key",
            path: self.key.clone(),
            message,
        })?;
        certificates(&pem.ca).map_err(|message| Error::Pem {
            flag: self.ca_flag,
            path: self.ca.clone(),
            message,
        })?;
        for (flag, certificate) in [("tls-cert", &pem.cert), (self.ca_flag, &pem.ca)] {
            crate::metrics::certificate_read(flag, certificate);
        }
        Ok(pem)
    }

    /// Checks the files every `every` and publishes their contents whenever
    /// they changed and read cleanly. A half-written or broken set is logged
    /// and skipped; the last good one stays in use.
    pub fn watch(self, first: Pem, every: Duration) -> tokio::sync::watch::Receiver<Arc<Pem>> {
        watch(move || self.read(), first, every)
    }
}

/// Calls `read` every `every` and publishes what it returns whenever it
/// changed and read cleanly; errors are logged (once each) and skipped.
pub(crate) fn watch(
    read: impl Fn() -> Result<Pem, Error> + Send + 'static,
    first: Pem,
    every: Duration,
) -> tokio::sync::watch::Receiver<Arc<Pem>> {
    let (publish, current) = tokio::sync::watch::channel(Arc::new(first));
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_error = None;
        loop {
            ticks.tick().await;
            if publish.is_closed() {
                return;
            }
            match read() {
                Ok(pem) if **publish.borrow() != pem => {
                    info!(fingerprint = %pem.fingerprint(), "certificate files changed; loading them");
                    last_error = None;
                    publish.send_replace(Arc::new(pem));
                }
                Ok(_) => last_error = None,
                Err(error) => {
                    let text = error.to_string();
                    if last_error.as_ref() != Some(&text) {
                        warn!(%error, "certificate files unreadable; keeping the ones loaded");
                    }
                    last_error = Some(text);
                }
            }
        }
    });
    current
}

impl Pem {
    /// A short digest of all three files, for logs.
    pub fn fingerprint(&self) -> String {
        let mut digest = Sha256::new();
        for part in [&self.cert, &self.key, &self.ca] {
            digest.update((part.len() as u64).to_be_bytes());
            digest.update(part);
        }
        digest.finalize()[..6]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    pub(crate) fn certificates(&self) -> Vec<CertificateDer<'static>> {
        certificates(&self.cert).unwrap_or_default()
    }

    pub(crate) fn ca_certificates(&self) -> Vec<CertificateDer<'static>> {
        certificates(&self.ca).unwrap_or_default()
    }

    pub(crate) fn private_key(&self) -> Result<PrivateKeyDer<'static>, Error> {
        private_key(&self.key).map_err(Error::Config)
    }
}

pub(crate) fn read(path: &Path, flag: &'static str) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|source| Error::Read {
        flag,
        path: path.to_path_buf(),
        source,
    })
}

pub(crate) fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not a PEM certificate list: {e}"))?;
    if certs.is_empty() {
        return Err("holds no PEM certificate".into());
    }
    Ok(certs)
}

pub(crate) fn private_key(pem: &[u8]) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_slice(pem).map_err(|e| format!("holds no usable PEM private key: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn a_file_without_pem_is_refused_naming_the_flag_and_the_file() {
        let dir = std::env::temp_dir().join(format!("jobrelay-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["worker-a".into()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let files = PemFiles {
            cert: write(&dir, "tls.crt", &cert.pem()),
            key: write(&dir, "tls.key", &key.serialize_pem()),
            ca: write(&dir, "ca.crt", "not a certificate"),
            ca_flag: "--manager-ca",
        };
        let error = files.read().unwrap_err().to_string();
        assert!(error.starts_with("--manager-ca "), "{error}");
        assert!(
            error.contains("ca.crt: holds no PEM certificate"),
            "{error}"
        );

        let files = PemFiles {
            ca: write(&dir, "ca.crt", &cert.pem()),
            key: dir.join("missing.key"),
            ..files
        };
        let error = files.read().unwrap_err().to_string();
        assert!(
            error.starts_with("--tls-key ") && error.contains("missing.key"),
            "{error}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
