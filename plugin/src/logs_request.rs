//! The request `logs` makes of the manager's logs API: jobrelay's path for
//! the Job ([`job_log_path`]) with `kubectl logs`'s query parameters and
//! jobrelay's `pod` and `allPods`, under the names the manager reads.

use jobrelay_proto::wire::job_log_path;

use crate::cli::LogsArgs;

/// The query parameters `args` ask for, in a fixed order.
pub fn query(args: &LogsArgs) -> Vec<(&'static str, String)> {
    let mut query = Vec::new();
    if let Some(container) = &args.container {
        query.push(("container", container.clone()));
    }
    if let Some(pod) = &args.pod {
        query.push(("pod", pod.clone()));
    }
    if args.all_pods {
        query.push(("allPods", "true".into()));
    }
    if args.follow {
        query.push(("follow", "true".into()));
    }
    if let Some(tail) = args.tail.filter(|n| *n >= 0) {
        query.push(("tailLines", tail.to_string()));
    }
    if let Some(since) = args.since {
        // Whole seconds, rounded up: `--since 500ms` asks for the last
        // second, not for everything.
        let seconds = since.as_millis().div_ceil(1000).max(1);
        query.push(("sinceSeconds", seconds.to_string()));
    }
    if args.previous {
        query.push(("previous", "true".into()));
    }
    if args.timestamps {
        query.push(("timestamps", "true".into()));
    }
    query
}

/// The path and query of the logs of Job `name` in `namespace`.
pub fn uri(namespace: &str, name: &str, args: &LogsArgs) -> String {
    let path = job_log_path(&encode(namespace), &encode(name));
    let query: Vec<String> = query(args)
        .into_iter()
        .map(|(key, value)| format!("{key}={}", encode(&value)))
        .collect();
    match query.is_empty() {
        true => path,
        false => format!("{path}?{}", query.join("&")),
    }
}

/// `text` percent-encoded for a path segment or a query value: all but
/// RFC 3986's unreserved characters.
fn encode(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                encoded.push(byte as char)
            }
            _ => encoded.push_str(&format!("%{byte:02X}")),
        }
    }
    encoded
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn each_flag_becomes_the_parameter_the_manager_reads() {
        let cases = [
            (LogsArgs::default(), ""),
            (
                LogsArgs {
                    container: Some("main".into()),
                    ..LogsArgs::default()
                },
                "?container=main",
            ),
            (
                LogsArgs {
                    pod: Some("train-x7k2p".into()),
                    ..LogsArgs::default()
                },
                "?pod=train-x7k2p",
            ),
            (
                LogsArgs {
                    all_pods: true,
                    follow: true,
                    previous: true,
                    timestamps: true,
                    ..LogsArgs::default()
                },
                "?allPods=true&follow=true&previous=true&timestamps=true",
            ),
            (
                LogsArgs {
                    tail: Some(20),
                    since: Some(Duration::from_secs(300)),
                    ..LogsArgs::default()
                },
                "?tailLines=20&sinceSeconds=300",
            ),
            (
                LogsArgs {
                    tail: Some(-1),
                    since: Some(Duration::from_millis(1500)),
                    ..LogsArgs::default()
                },
                "?sinceSeconds=2",
            ),
        ];
        for (args, query) in cases {
            assert_eq!(
                uri("ml", "train", &args),
                format!(
                    "/apis/visibility.jobrelay.dev/v1alpha1/namespaces/ml/jobs/train/log{query}"
                ),
                "{args:?}"
            );
        }
    }

    #[test]
    fn values_are_percent_encoded() {
        let args = LogsArgs {
            container: Some("a b&c=d/é".into()),
            ..LogsArgs::default()
        };
        assert_eq!(query(&args), [("container", "a b&c=d/é".to_string())]);
        assert!(uri("ml", "train", &args).ends_with("?container=a%20b%26c%3Dd%2F%C3%A9"));
    }
}
