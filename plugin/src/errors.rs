//! Errors a user reads: the API server's own words for a refused request
//! (its `Status` message, which names the object and the verb), and clap's
//! usage text for a command line it refused.

use std::fmt;

/// A request the API server (or the manager's logs API behind it) refused:
/// its `Status`. Shown as its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The HTTP code, e.g. 403 or 404.
    pub code: u16,
    /// The `Status` reason, e.g. `Forbidden`, `NotFound`.
    pub reason: String,
    pub message: String,
}

impl fmt::Display for ApiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.message.is_empty(), self.reason.is_empty()) {
            (false, _) => f.write_str(&self.message),
            (true, false) => write!(f, "{} ({})", self.reason, self.code),
            (true, true) => write!(f, "the API server answered {}", self.code),
        }
    }
}

impl std::error::Error for ApiError {}

/// A command line clap refused, with its usage text (which starts with
/// `error:` already); the binary prints it as it is and exits 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Usage(pub String);

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.trim_end())
    }
}

impl std::error::Error for Usage {}

/// `error` for a user: the API server's `Status` as an [`ApiError`], any
/// other error as it is.
pub fn from_kube(error: kube::Error) -> anyhow::Error {
    match error {
        kube::Error::Api(status) => ApiError {
            code: status.code,
            reason: status.reason.clone(),
            message: status.message.clone(),
        }
        .into(),
        other => anyhow::Error::new(other),
    }
}

/// The reason kube gives an error whose body was no `Status` (a proxy's or
/// the API server's own plain text, as for a path nothing serves).
const NOT_A_STATUS: &str = "Failed to parse error data";

/// `error` from the manager's logs API for a user: as [`from_kube`], and
/// when the API server answered without a `Status` — nothing serves
/// jobrelay's logs API there, or the manager behind it is unreachable —
/// what to look at.
pub fn from_logs_api(error: kube::Error) -> anyhow::Error {
    use jobrelay_proto::wire::{VISIBILITY_GROUP, VISIBILITY_VERSION};
    let error = from_kube(error);
    let Some(api) = error.downcast_ref::<ApiError>() else {
        return error;
    };
    if api.reason != NOT_A_STATUS {
        return error;
    }
    let apiservice = format!("{VISIBILITY_VERSION}.{VISIBILITY_GROUP}");
    let hint = match api.code {
        404 => format!(
            "the API server does not serve jobrelay's logs API; is the manager's APIService installed (kubectl get apiservice {apiservice})?"
        ),
        _ => format!(
            "jobrelay's logs API did not answer; see whether the manager's APIService is Available (kubectl get apiservice {apiservice})"
        ),
    };
    ApiError {
        message: format!("{} ({}): {hint}", api.message, api.code),
        ..api.clone()
    }
    .into()
}

/// Whether `error` is the API server's 404.
pub fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    #[test]
    fn a_refusal_reads_as_the_api_servers_message() {
        let forbidden = Status::failure(
            "jobs.visibility.jobrelay.dev \"train\" is forbidden: User \"ana\" cannot get resource \"jobs/log\"",
            "Forbidden",
        )
        .with_code(403);
        let error = from_kube(kube::Error::Api(forbidden.boxed()));
        assert_eq!(
            error.to_string(),
            "jobs.visibility.jobrelay.dev \"train\" is forbidden: User \"ana\" cannot get resource \"jobs/log\""
        );
        let api = error.downcast_ref::<ApiError>().expect("an ApiError");
        assert_eq!((api.code, api.reason.as_str()), (403, "Forbidden"));
        let bare = from_kube(kube::Error::Api(
            Status::failure("", "ServiceUnavailable")
                .with_code(503)
                .boxed(),
        ));
        assert_eq!(bare.to_string(), "ServiceUnavailable (503)");
        let unserved = Status::failure("404 page not found", NOT_A_STATUS).with_code(404);
        assert_eq!(
            from_logs_api(kube::Error::Api(unserved.boxed())).to_string(),
            "404 page not found (404): the API server does not serve jobrelay's logs API; is the manager's APIService installed (kubectl get apiservice v1alpha1.visibility.jobrelay.dev)?"
        );
        let refused = Status::failure("no such container \"sidecar\"", "NotFound").with_code(404);
        assert_eq!(
            from_logs_api(kube::Error::Api(refused.boxed())).to_string(),
            "no such container \"sidecar\""
        );
        assert!(is_not_found(&kube::Error::Api(
            Status::failure("x", "NotFound").with_code(404).boxed()
        )));
    }
}
