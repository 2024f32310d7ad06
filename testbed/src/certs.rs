//! The certificates a set of test clusters needs: one CA, a serving
//! certificate for every API server (all listen on 127.0.0.1), an admin client
//! certificate in group `system:masters`, and service-account signing keys.
//! The CA's key is kept beside it, so a real node's kubelet can be given a
//! client certificate later ([`node_client`]).

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("generating {what}: {source}")]
    Generate {
        what: &'static str,
        #[source]
        source: rcgen::Error,
    },
    #[error("writing {0}: {1}")]
    Write(PathBuf, #[source] std::io::Error),
    #[error("reading {0}: {1}")]
    Read(PathBuf, #[source] std::io::Error),
}

/// Paths of the PEM files written by [`write()`].
#[derive(Debug, Clone)]
pub struct Pki {
    pub ca_cert: PathBuf,
    pub ca_key: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub admin_cert: PathBuf,
    pub admin_key: PathBuf,
    pub service_account_key: PathBuf,
    pub service_account_public_key: PathBuf,
    /// The CA of the API server's front proxy (aggregated APIs trust the
    /// caller it names only on a connection with its client certificate),
    /// and that certificate, named [`FRONT_PROXY_CLIENT`].
    pub front_proxy_ca_cert: PathBuf,
    pub front_proxy_client_cert: PathBuf,
    pub front_proxy_client_key: PathBuf,
}

/// The common name of the front proxy's client certificate, the one name
/// the API servers allow.
pub const FRONT_PROXY_CLIENT: &str = "front-proxy-client";

/// Generates the PKI into `dir`.
pub fn write(dir: &Path) -> Result<Pki, Error> {
    std::fs::create_dir_all(dir).map_err(|e| Error::Write(dir.into(), e))?;
    let gen_err = |what| move |source| Error::Generate { what, source };

    let ca = RelayCa::new(CLUSTER_CA)?;
    let issuer = &ca.issuer;

    let serving_key = KeyPair::generate().map_err(gen_err("serving key"))?;
    let sans = [
        "127.0.0.1",
        "localhost",
        "10.0.0.1",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
    ];
    let mut serving =
        CertificateParams::new(sans.map(String::from).to_vec()).map_err(gen_err("serving"))?;
    serving.distinguished_name = name("kube-apiserver", None);
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving_cert = serving
        .signed_by(&serving_key, issuer)
        .map_err(gen_err("serving certificate"))?;

    let admin_key = KeyPair::generate().map_err(gen_err("admin key"))?;
    let mut admin = CertificateParams::new(Vec::<String>::new()).map_err(gen_err("admin"))?;
    admin.distinguished_name = name("jobrelay-admin", Some("system:masters"));
    admin.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let admin_cert = admin
        .signed_by(&admin_key, issuer)
        .map_err(gen_err("admin certificate"))?;

    let service_account_key = KeyPair::generate().map_err(gen_err("service-account key"))?;
    let front_proxy_ca = RelayCa::new("jobrelay test front-proxy CA")?;
    let front_proxy = front_proxy_ca.client(FRONT_PROXY_CLIENT)?;

    let pki = Pki {
        ca_cert: dir.join("ca.crt"),
        ca_key: dir.join("ca.key"),
        serving_cert: dir.join("apiserver.crt"),
        serving_key: dir.join("apiserver.key"),
        admin_cert: dir.join("admin.crt"),
        admin_key: dir.join("admin.key"),
        service_account_key: dir.join("service-account.key"),
        service_account_public_key: dir.join("service-account.pub"),
        front_proxy_ca_cert: dir.join("front-proxy-ca.crt"),
        front_proxy_client_cert: dir.join("front-proxy-client.crt"),
        front_proxy_client_key: dir.join("front-proxy-client.key"),
    };
    for (path, pem) in [
        (&pki.ca_cert, ca.ca_pem.clone()),
        (&pki.ca_key, ca.issuer.key().serialize_pem()),
        (&pki.serving_cert, serving_cert.pem()),
        (&pki.serving_key, serving_key.serialize_pem()),
        (&pki.admin_cert, admin_cert.pem()),
        (&pki.admin_key, admin_key.serialize_pem()),
        (
            &pki.service_account_key,
            service_account_key.serialize_pem(),
        ),
        (
            &pki.service_account_public_key,
            service_account_key.public_key_pem(),
        ),
        (&pki.front_proxy_ca_cert, front_proxy_ca.ca_pem.clone()),
        (&pki.front_proxy_client_cert, front_proxy.cert),
        (&pki.front_proxy_client_key, front_proxy.key),
    ] {
        std::fs::write(path, pem).map_err(|e| Error::Write(path.clone(), e))?;
    }
    Ok(pki)
}

/// The common name of the clusters' CA.
const CLUSTER_CA: &str = "jobrelay test CA";

/// A kubelet's client certificate for Node `node`: user `system:node:<node>`
/// in group `system:nodes`, signed by the clusters' CA (read back from
/// `pki`), as the API server expects of a kubelet.
pub fn node_client(pki: &Pki, node: &str) -> Result<Issued, Error> {
    let gen_err = |what| move |source| Error::Generate { what, source };
    let pem =
        std::fs::read_to_string(&pki.ca_key).map_err(|e| Error::Read(pki.ca_key.clone(), e))?;
    let ca_key = KeyPair::from_pem(&pem).map_err(gen_err("reading the CA key"))?;
    let issuer = Issuer::new(ca_params(CLUSTER_CA)?, ca_key);
    let key = KeyPair::generate().map_err(gen_err("node key"))?;
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(gen_err("node"))?;
    params.distinguished_name = name(&format!("system:node:{node}"), Some("system:nodes"));
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(gen_err("node certificate"))?;
    Ok(Issued {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// What a CA named `common_name` is: the same every time, so an issuer
/// rebuilt from its key signs as the original did.
fn ca_params(common_name: &str) -> Result<CertificateParams, Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())
        .map_err(|source| Error::Generate { what: "CA", source })?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name = name(common_name, None);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(params)
}

fn name(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    if let Some(org) = organization {
        dn.push(DnType::OrganizationName, org);
    }
    dn
}

/// A CA: the test clusters' own, and the relay's, which signs the manager's
/// server certificate and each agent's client certificate (whose DNS SAN is
/// the cluster's name).
pub struct RelayCa {
    issuer: Issuer<'static, KeyPair>,
    /// The CA certificate, PEM.
    pub ca_pem: String,
}

/// A certificate and its key, PEM.
#[derive(Debug, Clone)]
pub struct Issued {
    pub cert: String,
    pub key: String,
}

impl RelayCa {
    /// A new CA named `common_name`.
    pub fn new(common_name: &str) -> Result<RelayCa, Error> {
        let gen_err = |what| move |source| Error::Generate { what, source };
        let key = KeyPair::generate().map_err(gen_err("relay CA key"))?;
        let params = ca_params(common_name)?;
        let cert = params
            .self_signed(&key)
            .map_err(gen_err("relay CA certificate"))?;
        Ok(RelayCa {
            issuer: Issuer::new(params, key),
            ca_pem: cert.pem(),
        })
    }

    /// The manager's serving certificate, for 127.0.0.1 and localhost.
    pub fn server(&self) -> Result<Issued, Error> {
        self.server_for(&[])
    }

    /// The manager's server certificate for loopback and `addresses` too
    /// (IP addresses or DNS names).
    pub fn server_for(&self, addresses: &[String]) -> Result<Issued, Error> {
        let mut sans = vec!["127.0.0.1".to_string(), "localhost".to_string()];
        sans.extend(addresses.iter().cloned());
        self.issue(sans, ExtendedKeyUsagePurpose::ServerAuth, false)
    }

    /// An agent's client certificate naming `cluster`.
    pub fn client(&self, cluster: &str) -> Result<Issued, Error> {
        self.issue(
            vec![cluster.into()],
            ExtendedKeyUsagePurpose::ClientAuth,
            false,
        )
    }

    /// A certificate naming `cluster` made for a server (serverAuth), not
    /// for a client.
    pub fn server_usage_client(&self, cluster: &str) -> Result<Issued, Error> {
        self.issue(
            vec![cluster.into()],
            ExtendedKeyUsagePurpose::ServerAuth,
            false,
        )
    }

    /// A client certificate naming `cluster` that expired in 2021.
    pub fn expired_client(&self, cluster: &str) -> Result<Issued, Error> {
        self.issue(
            vec![cluster.into()],
            ExtendedKeyUsagePurpose::ClientAuth,
            true,
        )
    }

    /// A client certificate naming `cluster` that expires `valid_for` from
    /// now (valid since a minute ago).
    pub fn client_expiring_in(
        &self,
        cluster: &str,
        valid_for: std::time::Duration,
    ) -> Result<Issued, Error> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let epoch = rcgen::date_time_ymd(1970, 1, 1);
        self.issue_with(
            vec![cluster.into()],
            ExtendedKeyUsagePurpose::ClientAuth,
            |params| {
                params.not_before = epoch + now.saturating_sub(std::time::Duration::from_secs(60));
                params.not_after = epoch + now + valid_for;
            },
        )
    }

    fn issue(
        &self,
        sans: Vec<String>,
        usage: ExtendedKeyUsagePurpose,
        expired: bool,
    ) -> Result<Issued, Error> {
        self.issue_with(sans, usage, |params| {
            if expired {
                params.not_before = rcgen::date_time_ymd(2020, 1, 1);
                params.not_after = rcgen::date_time_ymd(2021, 1, 1);
            }
        })
    }

    fn issue_with(
        &self,
        sans: Vec<String>,
        usage: ExtendedKeyUsagePurpose,
        validity: impl FnOnce(&mut CertificateParams),
    ) -> Result<Issued, Error> {
        let gen_err = |what| move |source| Error::Generate { what, source };
        let key = KeyPair::generate().map_err(gen_err("relay key"))?;
        let common_name = sans.first().cloned().unwrap_or_default();
        let mut params = CertificateParams::new(sans).map_err(gen_err("relay certificate"))?;
        params.distinguished_name = name(&common_name, None);
        params.extended_key_usages = vec![usage];
        validity(&mut params);
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(gen_err("relay certificate"))?;
        Ok(Issued {
            cert: cert.pem(),
            key: key.serialize_pem(),
        })
    }
}

/// A client certificate naming `cluster`, signed by its own key: what
/// anyone can make, and no CA vouches for.
pub fn self_signed_client(cluster: &str) -> Result<Issued, Error> {
    let gen_err = |what| move |source| Error::Generate { what, source };
    let key = KeyPair::generate().map_err(gen_err("self-signed key"))?;
    let mut params =
        CertificateParams::new(vec![cluster.to_string()]).map_err(gen_err("self-signed"))?;
    params.distinguished_name = name(cluster, None);
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = params
        .self_signed(&key)
        .map_err(gen_err("self-signed certificate"))?;
    Ok(Issued {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

impl Issued {
    /// Writes `<stem>.crt` and `<stem>.key` into `dir`; returns their paths.
    pub fn write(&self, dir: &Path, stem: &str) -> Result<(PathBuf, PathBuf), Error> {
        std::fs::create_dir_all(dir).map_err(|e| Error::Write(dir.into(), e))?;
        let cert = dir.join(format!("{stem}.crt"));
        let key = dir.join(format!("{stem}.key"));
        for (path, pem) in [(&cert, &self.cert), (&key, &self.key)] {
            write_atomically(path, pem)?;
        }
        Ok((cert, key))
    }
}

/// Writes through a temporary file and a rename, as a Secret update does, so
/// a reader never sees half a file.
pub fn write_atomically(path: &Path, text: &str) -> Result<(), Error> {
    let partial = path.with_extension("partial");
    std::fs::write(&partial, text).map_err(|e| Error::Write(partial.clone(), e))?;
    std::fs::rename(&partial, path).map_err(|e| Error::Write(path.into(), e))
}

/// The SHA-256 of the SubjectPublicKeyInfo of the key in `key_pem`, in hex:
/// what `WorkerCluster.spec.certificate.publicKeySHA256` pins.
pub fn public_key_sha256(key_pem: &str) -> Result<String, Error> {
    use sha2::Digest;
    let key = KeyPair::from_pem(key_pem).map_err(|source| Error::Generate {
        what: "reading a key",
        source,
    })?;
    let spki = rcgen::PublicKeyData::subject_public_key_info(&key);
    Ok(sha2::Sha256::digest(spki)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect())
}
