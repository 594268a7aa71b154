//! The configurations in `examples/` that the README tells users to run are valid.

use std::path::Path;

use tandem_runtime::config::{NodeConfig, Role};

#[test]
fn the_example_primary_and_backup_configs_parse_and_agree() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let primary = NodeConfig::load(&examples.join("primary.toml")).unwrap();
    let backup = NodeConfig::load(&examples.join("backup.toml")).unwrap();
    assert_eq!(primary.role, Role::Primary);
    assert_eq!(backup.role, Role::Backup);
    assert_eq!(
        primary.group, backup.group,
        "both nodes serve the same group"
    );
    assert_eq!(backup.primary_address(), Some(primary.listen));
    assert_eq!(
        primary
            .backups()
            .map(|peer| peer.address)
            .collect::<Vec<_>>(),
        vec![backup.listen]
    );
}
