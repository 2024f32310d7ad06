use super::*;

const GUIDE: &str = "\
# Install

<!-- guide: placeholders registry.example.com jobrelay.example.com:8443 -->

Build:

<!-- guide: run -->
```sh
echo registry.example.com/jobrelay
```

<!-- guide: see -->
```text
registry.example.com/jobrelay
```

An example, not run:

```yaml
kind: Nothing
```

<!-- guide: not-run no registry here -->
```sh
skopeo copy a b
```

<!-- guide: run -->
````sh
cat <<'EOF'
```
EOF
kubectl get wc
````

<!-- guide: see -->
```text
NAME       CONNECTED   …   MIRRORS
worker-a   True        …   0
```
";

#[test]
fn marked_blocks_are_the_steps_in_order_with_what_each_prints() {
    let guide = parse(GUIDE).expect("a guide");
    assert_eq!(
        guide.placeholders,
        ["registry.example.com", "jobrelay.example.com:8443"]
    );
    assert_eq!(guide.steps.len(), 2, "{guide:?}");
    assert_eq!(guide.steps[0].line, 8);
    assert_eq!(
        guide.steps[0].script,
        "echo registry.example.com/jobrelay\n"
    );
    assert_eq!(guide.steps[0].see, ["registry.example.com/jobrelay"]);
    // A longer fence holds a shorter one; unmarked blocks are not steps.
    assert_eq!(
        guide.steps[1].script,
        "cat <<'EOF'\n```\nEOF\nkubectl get wc\n"
    );
    assert_eq!(guide.steps[1].see.len(), 2);
    assert_eq!(guide.not_run, [(24, "no registry here".to_string())]);
}

#[test]
fn a_mark_without_a_block_or_an_unknown_mark_or_an_unclosed_block_is_refused() {
    assert_eq!(
        parse("<!-- guide: run -->\ntext\n"),
        Err(GuideError::NoBlock(1))
    );
    assert_eq!(
        parse("<!-- guide: skip -->\n```sh\n```\n"),
        Err(GuideError::UnknownMark(1, "skip".into()))
    );
    assert_eq!(
        parse("<!-- guide: run -->\n```sh\nls\n"),
        Err(GuideError::Unclosed(2))
    );
    assert_eq!(
        parse("<!-- guide: see -->\n```text\nx\n```\n"),
        Err(GuideError::SeeWithoutRun(1))
    );
    assert_eq!(
        parse("<!-- guide: not-run -->\n```sh\nls\n```\n"),
        Err(GuideError::NoReason(1))
    );
}

#[test]
fn a_named_step_is_a_procedures_not_the_installs_and_is_found_by_its_name() {
    let text = format!(
        "{GUIDE}\n<!-- guide: step rollback-agents -->\n```sh\nhelm rollback jobrelay\n```\n\n<!-- guide: see -->\n```text\nRollback was a success\n```\n"
    );
    let guide = parse(&text).expect("a guide");
    assert_eq!(install(&guide.steps).count(), 2, "{guide:?}");
    let step = named(&guide.steps, "rollback-agents").expect("the named step");
    assert_eq!(step.script, "helm rollback jobrelay\n");
    assert_eq!(step.see, ["Rollback was a success"]);
    assert_eq!(named(&guide.steps, "rollback-manager"), None);
    assert_eq!(
        parse("<!-- guide: step -->\n```sh\nls\n```\n"),
        Err(GuideError::StepName(1))
    );
    assert_eq!(
        parse("<!-- guide: step a b -->\n```sh\nls\n```\n"),
        Err(GuideError::StepName(1))
    );
    assert_eq!(
        parse("<!-- guide: step a -->\n```sh\nls\n```\n<!-- guide: step a -->\n```sh\nls\n```\n"),
        Err(GuideError::StepName(5))
    );
}

#[test]
fn only_declared_placeholders_are_replaced_and_each_must_be_given() {
    let guide = parse(GUIDE).expect("a guide");
    let given = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    };
    let steps = substitute(
        &guide,
        &given(&[
            ("registry.example.com", "localhost:5000"),
            ("jobrelay.example.com:8443", "10.0.0.1:30443"),
        ]),
    )
    .expect("substituted");
    assert_eq!(steps[0].script, "echo localhost:5000/jobrelay\n");
    assert_eq!(steps[0].see, ["localhost:5000/jobrelay"]);

    assert_eq!(
        substitute(&guide, &given(&[("registry.example.com", "x")])),
        Err(GuideError::NotGiven("jobrelay.example.com:8443".into()))
    );
    assert_eq!(
        substitute(
            &guide,
            &given(&[
                ("registry.example.com", "x"),
                ("jobrelay.example.com:8443", "y"),
                ("busybox", "z"),
            ])
        ),
        Err(GuideError::Undeclared("busybox".into()))
    );
}

#[test]
fn a_line_is_shown_when_its_words_appear_in_order_on_one_printed_line() {
    let output = "NAME       CONNECTED   AGE   MIRRORS\nworker-a   True        12s   0\n";
    assert!(shows(output, "worker-a   True        …   0"));
    assert!(shows(output, "NAME CONNECTED MIRRORS"));
    assert!(!shows(output, "worker-a False"), "a word that is not there");
    assert!(!shows(output, "0 worker-a"), "words out of order");
    assert!(!shows(output, "NAME worker-a"), "words of two lines");
    assert!(shows(output, "work… True"), "a word by its beginning");
    assert!(!shows(output, "worker-b… True"));
    assert_eq!(
        missing(output, &["worker-a True".into(), "worker-b True".into()]),
        ["worker-b True"]
    );
}

#[test]
fn the_install_guide_reads_as_a_script() {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/install.md"),
    )
    .expect("reading docs/install.md");
    let guide = parse(&text).unwrap_or_else(|e| panic!("docs/install.md: {e}"));
    assert!(
        install(&guide.steps).count() >= 10,
        "the guide's runnable blocks are marked: {} found",
        guide.steps.len()
    );
    // The upgrade proof runs these by name.
    for name in UPGRADE_STEPS {
        assert!(
            named(&guide.steps, name).is_some(),
            "docs/install.md marks no `step {name}`"
        );
    }
    for step in &guide.steps {
        assert!(
            !step.script.trim().is_empty(),
            "docs/install.md:{}: an empty block",
            step.line
        );
    }
}
