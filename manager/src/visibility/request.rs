//! What a request to the logs API asks, read from its path, its query and
//! the headers the API server's front proxy sets: pure, so every rule has
//! a test. The API server has authenticated the caller; jobrelay trusts the
//! headers only on a connection whose client certificate the front proxy's
//! CA signed, with a name the API server allows ([`FrontProxy`]).

use std::collections::BTreeMap;

use jobrelay_proto::wire::{VISIBILITY_GROUP, VISIBILITY_VERSION};

/// What a path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/apis/<group>/<version>`: the resources served (discovery).
    Resources,
    /// `/healthz`, `/readyz`, `/livez`.
    Health,
    /// The logs of a Job: `…/namespaces/<ns>/jobs/<name>/log`.
    JobLog {
        namespace: String,
        name: String,
    },
    NotFound,
}

/// Which route `path` is.
pub fn route(path: &str) -> Route {
    if matches!(path, "/healthz" | "/readyz" | "/livez") {
        return Route::Health;
    }
    let prefix = format!("/apis/{VISIBILITY_GROUP}/{VISIBILITY_VERSION}");
    let Some(rest) = path.strip_prefix(&prefix) else {
        return Route::NotFound;
    };
    let rest = rest.trim_end_matches('/');
    if rest.is_empty() {
        return Route::Resources;
    }
    let parts: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["namespaces", namespace, "jobs", name, "log"]
            if !namespace.is_empty() && !name.is_empty() =>
        {
            Route::JobLog {
                namespace: namespace.to_string(),
                name: name.to_string(),
            }
        }
        _ => Route::NotFound,
    }
}

/// What the caller asks of a Job's logs: kubectl's `pods/log` parameters,
/// and which of the mirror's Pods.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogQuery {
    pub container: Option<String>,
    pub pod: Option<String>,
    pub all_pods: bool,
    pub follow: bool,
    pub tail_lines: Option<i64>,
    pub since_seconds: Option<i64>,
    pub previous: bool,
    pub timestamps: bool,
}

/// A parameter that cannot be taken, named with its value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("query parameter {name}={value:?}: {why}")]
pub struct BadParameter {
    pub name: String,
    pub value: String,
    pub why: &'static str,
}

/// Reads the query string of a logs request.
pub fn log_query(query: Option<&str>) -> Result<LogQuery, BadParameter> {
    let mut asked = LogQuery::default();
    for (name, value) in pairs(query.unwrap_or_default()) {
        let bad = |why| BadParameter {
            name: name.clone(),
            value: value.clone(),
            why,
        };
        match name.as_str() {
            "container" => asked.container = Some(value.clone()).filter(|v| !v.is_empty()),
            "pod" => asked.pod = Some(value.clone()).filter(|v| !v.is_empty()),
            "allPods" => asked.all_pods = flag(&value).ok_or_else(|| bad("not true or false"))?,
            "follow" => asked.follow = flag(&value).ok_or_else(|| bad("not true or false"))?,
            "previous" => asked.previous = flag(&value).ok_or_else(|| bad("not true or false"))?,
            "timestamps" => {
                asked.timestamps = flag(&value).ok_or_else(|| bad("not true or false"))?
            }
            "tailLines" => {
                asked.tail_lines = Some(count(&value).ok_or_else(|| bad("not a count of lines"))?)
            }
            "sinceSeconds" => {
                let seconds = count(&value).filter(|s| *s > 0);
                asked.since_seconds = Some(seconds.ok_or_else(|| bad("not a positive count"))?)
            }
            // kubectl may send these; the API server's own are ignored.
            "limitBytes" | "insecureSkipTLSVerifyBackend" | "pretty" => {}
            _ => return Err(bad("not a parameter of a Job's logs")),
        }
    }
    if asked.all_pods && asked.pod.is_some() {
        return Err(BadParameter {
            name: "allPods".into(),
            value: "true".into(),
            why: "cannot be asked with pod",
        });
    }
    Ok(asked)
}

fn flag(value: &str) -> Option<bool> {
    match value {
        "" | "true" | "1" => Some(true),
        "false" | "0" => Some(false),
        _ => None,
    }
}

fn count(value: &str) -> Option<i64> {
    value.parse::<i64>().ok().filter(|n| *n >= 0)
}

/// The query's `name=value` pairs, percent-decoded.
fn pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(name), decode(value))
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = bytes
            .get(i + 1..i + 3)
            .filter(|_| bytes[i] == b'%')
            .and_then(|hex| u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok());
        match (bytes[i], escaped) {
            (_, Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b'+', None) => {
                out.push(b' ');
                i += 1;
            }
            (byte, None) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Where the API server's front proxy says who the caller is: the header
/// names of `extension-apiserver-authentication` in `kube-system`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Headers {
    pub user: Vec<String>,
    pub group: Vec<String>,
    pub extra_prefix: Vec<String>,
    pub uid: Vec<String>,
}

impl Default for Headers {
    fn default() -> Self {
        Headers {
            user: vec!["X-Remote-User".into()],
            group: vec!["X-Remote-Group".into()],
            extra_prefix: vec!["X-Remote-Extra-".into()],
            uid: Vec::new(),
        }
    }
}

/// The caller the API server authenticated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Caller {
    pub user: String,
    pub uid: Option<String>,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The caller `headers` name, `None` when no user header is set. Header
/// names are matched without case, as HTTP's are.
pub fn caller(names: &Headers, headers: &[(String, String)]) -> Option<Caller> {
    let values = |wanted: &[String]| -> Vec<String> {
        headers
            .iter()
            .filter(|(name, _)| wanted.iter().any(|w| w.eq_ignore_ascii_case(name)))
            .map(|(_, value)| value.clone())
            .collect()
    };
    let user = values(&names.user).into_iter().find(|u| !u.is_empty())?;
    let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, value) in headers {
        let lower = name.to_ascii_lowercase();
        let key = names
            .extra_prefix
            .iter()
            .find_map(|prefix| lower.strip_prefix(&prefix.to_ascii_lowercase()));
        if let Some(key) = key.filter(|k| !k.is_empty()) {
            extra.entry(decode(key)).or_default().push(value.clone());
        }
    }
    Some(Caller {
        user,
        uid: values(&names.uid).into_iter().next(),
        groups: values(&names.group),
        extra,
    })
}

#[cfg(test)]
#[path = "request_tests.rs"]
mod tests;
