//! Manifest error cases as fixture pairs: `NAME.toml` and the message it must
//! produce in `NAME.err`. Run with `BLESS=1` to rewrite the `.err` files
//! after an intended change of wording.

use super::*;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/manifest");

#[test]
fn every_bad_manifest_fixture_gives_its_message() {
    let bless = std::env::var_os("BLESS").is_some();
    let mut checked = 0;
    let mut entries: Vec<_> = std::fs::read_dir(FIXTURES)
        .expect("fixture folder exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    entries.sort();
    for toml_path in entries {
        let text = std::fs::read_to_string(&toml_path).unwrap();
        let name = toml_path.file_name().unwrap().to_str().unwrap();
        let err = Manifest::parse(Path::new(name), Path::new("/catalog"), &text)
            .expect_err(&format!("{name} should be refused"))
            .to_string();
        let err_path = toml_path.with_extension("err");
        if bless {
            std::fs::write(&err_path, format!("{err}\n")).unwrap();
        } else {
            let expected = std::fs::read_to_string(&err_path)
                .unwrap_or_else(|_| panic!("{} is missing; run with BLESS=1", err_path.display()));
            assert_eq!(err, expected.trim_end(), "message for {name}");
        }
        checked += 1;
    }
    assert!(checked >= 8, "only {checked} fixtures found");
}

#[test]
fn a_valid_manifest_is_fully_defaulted() {
    let text = r#"
[[plugin]]
name = "helpdesk"
component = "plugins/helpdesk.wasm"
sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
config = { rounds = 50 }

[[plugin.tool]]
name = "helpdesk_ticket_list"
risk = "read"

[[plugin.tool]]
name = "helpdesk_ticket_close"
risk = "write"
idempotent = true
"#;
    let m = Manifest::parse(Path::new("m.toml"), Path::new("/catalog"), text).unwrap();
    let p = &m.plugins[0];
    assert_eq!(p.name.as_str(), "helpdesk");
    assert_eq!(p.component, Path::new("/catalog/plugins/helpdesk.wasm"));
    assert_eq!(p.instance, InstanceMode::Session);
    assert_eq!(p.limits, Limits::default());
    assert_eq!(p.config["rounds"], "50");
    assert_eq!(p.line, 2);
    assert_eq!(p.tools[1].risk, RiskClass::Write);
    assert!(p.tools[1].idempotent);
    assert_eq!(p.tools[1].line, 12);
    assert_eq!(
        m.tool("helpdesk_ticket_close").unwrap().1.risk,
        RiskClass::Write
    );
}
