//! `docs/install.md` read as a script: the command blocks a user runs, in
//! the order written, and what the guide says each should print. Marks are
//! HTML comments, invisible on a rendered page:
//!
//! - `<!-- guide: placeholders NAME … -->` — the only strings a test may
//!   replace (a registry, an address), each once declared;
//! - `<!-- guide: run -->` before a fenced block — a `sh` script run as
//!   written;
//! - `<!-- guide: see -->` before a fenced block — lines the run block
//!   before it prints, each as words in order on one printed line (`…`
//!   stands for any words);
//! - `<!-- guide: step NAME -->` before a fenced block — a `sh` script a
//!   user runs at one moment of a procedure other than the install (an
//!   upgrade, a rollback); the test that walks that procedure runs it by
//!   its name, the install's test does not;
//! - `<!-- guide: not-run REASON -->` before a fenced block — a command a
//!   user runs that the test cannot, and why; the test reports each.
//!
//! Pure: parsing and matching; the runner lives beside the tests that run
//! it.

use std::collections::BTreeMap;

/// The guide as a script.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Guide {
    /// The strings the guide lets a reader replace.
    pub placeholders: Vec<String>,
    pub steps: Vec<Step>,
    /// Blocks a user runs that the test does not: (line, why).
    pub not_run: Vec<(usize, String)>,
}

/// One block a user runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// The line of the guide the block starts on (1-based), for messages.
    pub line: usize,
    /// The name of a procedure's step (`step NAME`); none for the install.
    pub name: Option<String>,
    pub script: String,
    /// Lines the guide says the block prints.
    pub see: Vec<String>,
}

/// Why the guide cannot be read as a script.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GuideError {
    #[error("line {0}: a `guide:` mark must be followed by a fenced block")]
    NoBlock(usize),
    #[error("line {0}: the fenced block is never closed")]
    Unclosed(usize),
    #[error("line {0}: unknown mark `{1}` (placeholders, run, step, see or not-run)")]
    UnknownMark(usize, String),
    #[error("line {0}: `see` follows no `run` block")]
    SeeWithoutRun(usize),
    #[error("line {0}: `not-run` must say why")]
    NoReason(usize),
    #[error("line {0}: `step` must be named, once")]
    StepName(usize),
    #[error("the test gives `{0}`, which the guide does not declare as a placeholder")]
    Undeclared(String),
    #[error("the guide declares `{0}`, for which the test gives nothing")]
    NotGiven(String),
}

enum Mark {
    Placeholders(Vec<String>),
    Run(Option<String>),
    See,
    NotRun(String),
}

fn mark(line_no: usize, line: &str) -> Result<Option<Mark>, GuideError> {
    let Some(inner) = line
        .trim()
        .strip_prefix("<!-- guide:")
        .and_then(|rest| rest.strip_suffix("-->"))
    else {
        return Ok(None);
    };
    let mut words = inner.split_whitespace();
    match words.next() {
        Some("run") => Ok(Some(Mark::Run(None))),
        Some("step") => match words.collect::<Vec<_>>()[..] {
            [name] => Ok(Some(Mark::Run(Some(name.to_string())))),
            _ => Err(GuideError::StepName(line_no)),
        },
        Some("see") => Ok(Some(Mark::See)),
        Some("placeholders") => Ok(Some(Mark::Placeholders(
            words.map(str::to_string).collect(),
        ))),
        Some("not-run") => match words.collect::<Vec<_>>().join(" ") {
            reason if reason.is_empty() => Err(GuideError::NoReason(line_no)),
            reason => Ok(Some(Mark::NotRun(reason))),
        },
        other => Err(GuideError::UnknownMark(
            line_no,
            other.unwrap_or_default().to_string(),
        )),
    }
}

/// The fenced block starting at `lines[at]` (its opening fence): its text
/// and the index after its closing fence.
fn block(lines: &[&str], at: usize) -> Result<(String, usize), GuideError> {
    let fence = lines[at].trim_start();
    let ticks = fence.len() - fence.trim_start_matches('`').len();
    let closing = "`".repeat(ticks);
    let body: Vec<&str> = lines[at + 1..]
        .iter()
        .take_while(|l| l.trim() != closing)
        .copied()
        .collect();
    let end = at + 1 + body.len();
    if end >= lines.len() {
        return Err(GuideError::Unclosed(at + 1));
    }
    Ok((body.join("\n") + "\n", end + 1))
}

/// Reads the marked blocks of `markdown`.
pub fn parse(markdown: &str) -> Result<Guide, GuideError> {
    let lines: Vec<&str> = markdown.lines().collect();
    let mut guide = Guide::default();
    let mut i = 0;
    while i < lines.len() {
        let Some(found) = mark(i + 1, lines[i])? else {
            i += 1;
            continue;
        };
        if let Mark::Placeholders(names) = found {
            guide.placeholders.extend(names);
            i += 1;
            continue;
        }
        let fence = i + 1;
        if !lines
            .get(fence)
            .is_some_and(|l| l.trim_start().starts_with("```"))
        {
            return Err(GuideError::NoBlock(i + 1));
        }
        let (text, next) = block(&lines, fence)?;
        match found {
            Mark::Run(name) => {
                if name
                    .as_ref()
                    .is_some_and(|n| guide.steps.iter().any(|s| s.name.as_ref() == Some(n)))
                {
                    return Err(GuideError::StepName(i + 1));
                }
                guide.steps.push(Step {
                    line: fence + 1,
                    name,
                    script: text,
                    see: Vec::new(),
                })
            }
            Mark::See => {
                let step = guide
                    .steps
                    .last_mut()
                    .ok_or(GuideError::SeeWithoutRun(i + 1))?;
                step.see.extend(
                    text.lines()
                        .filter(|l| !l.trim().is_empty())
                        .map(String::from),
                );
            }
            Mark::NotRun(reason) => guide.not_run.push((fence + 1, reason)),
            Mark::Placeholders(_) => unreachable!("handled above"),
        }
        i = next;
    }
    Ok(guide)
}

/// The steps with each declared placeholder replaced by what `given` says;
/// every placeholder must be given, and nothing else.
pub fn substitute(
    guide: &Guide,
    given: &BTreeMap<String, String>,
) -> Result<Vec<Step>, GuideError> {
    if let Some(name) = given.keys().find(|k| !guide.placeholders.contains(k)) {
        return Err(GuideError::Undeclared(name.clone()));
    }
    if let Some(name) = guide.placeholders.iter().find(|p| !given.contains_key(*p)) {
        return Err(GuideError::NotGiven(name.clone()));
    }
    // Longest first, so that a placeholder inside another is not replaced
    // within it.
    let mut order: Vec<(&String, &String)> = given.iter().collect();
    order.sort_by_key(|(name, _)| std::cmp::Reverse(name.len()));
    let replace = |text: &str| {
        order.iter().fold(text.to_string(), |text, (name, value)| {
            text.replace(*name, value)
        })
    };
    Ok(guide
        .steps
        .iter()
        .map(|step| Step {
            line: step.line,
            name: step.name.clone(),
            script: replace(&step.script),
            see: step.see.iter().map(|l| replace(l)).collect(),
        })
        .collect())
}

/// The steps of the upgrade and rollback that `docs/install.md` names and
/// the upgrade proof runs, in its order.
pub const UPGRADE_STEPS: [&str; 3] = ["crds-to-the-release", "rollback-agents", "rollback-manager"];

/// The install's steps: the blocks that belong to no named procedure step.
pub fn install(steps: &[Step]) -> impl Iterator<Item = &Step> {
    steps.iter().filter(|step| step.name.is_none())
}

/// The step named `name`.
pub fn named<'a>(steps: &'a [Step], name: &str) -> Option<&'a Step> {
    steps.iter().find(|step| step.name.as_deref() == Some(name))
}

/// Whether some line of `output` holds the words of `expected` in order
/// (`…` standing for any words between, and a word ending in `…` for any
/// word it begins).
pub fn shows(output: &str, expected: &str) -> bool {
    let wanted: Vec<&str> = expected.split_whitespace().filter(|w| *w != "…").collect();
    let matches = |want: &str, have: &str| match want.strip_suffix('…') {
        Some(prefix) => have.starts_with(prefix),
        None => have == want,
    };
    output.lines().any(|line| {
        let mut words = line.split_whitespace();
        wanted.iter().all(|w| words.any(|have| matches(w, have)))
    })
}

/// The lines of `see` that `output` does not show.
pub fn missing<'a>(output: &str, see: &'a [String]) -> Vec<&'a str> {
    see.iter()
        .map(String::as_str)
        .filter(|line| !shows(output, line))
        .collect()
}

#[cfg(test)]
#[path = "guide_tests.rs"]
mod tests;
