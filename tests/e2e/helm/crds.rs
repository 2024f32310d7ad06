//! The CRDs as templates of the manager's release: rendered there (and in
//! a release of neither part), never in an agent's, kept on uninstall
//! unless told.

use super::*;

/// The CRDs a release renders: (name, kept on uninstall).
fn crds_of(objects: &[Value]) -> Vec<(String, bool)> {
    objects
        .iter()
        .filter(|o| kind(o) == "CustomResourceDefinition")
        .map(|o| {
            let kept = o["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep";
            (name(o).to_string(), kept)
        })
        .collect()
}

#[tokio::test]
async fn the_crds_are_templates_of_the_managers_release_kept_on_uninstall() {
    let both = |kept| {
        vec![
            (CRD_NAME.to_string(), kept),
            (SET_CRD_NAME.to_string(), kept),
        ]
    };
    let manager = render("jobrelay-system", MANAGER_VALUES).await;
    assert_eq!(crds_of(&manager.objects), both(true));
    let unkept = [MANAGER_VALUES, &["--set", "crds.keep=false"]].concat();
    let unkept = render("jobrelay-system", &unkept).await;
    assert_eq!(crds_of(&unkept.objects), both(false));
    let off = [MANAGER_VALUES, &["--set", "crds.enabled=false"]].concat();
    assert!(crds_of(&render("jobrelay-system", &off).await.objects).is_empty());
    // An agent's release needs none; a release of neither part is the CRDs
    // alone.
    assert!(crds_of(&render("jobrelay-system", AGENT_VALUES).await.objects).is_empty());
    assert_eq!(
        crds_of(&render("jobrelay-system", &[]).await.objects),
        both(true)
    );
}
