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
    assert_eq!(
        p.component,
        ComponentSource::File("/catalog/plugins/helpdesk.wasm".into())
    );
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

#[test]
fn registry_components_trust_and_registries_parse_and_mistakes_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let key = crate::signing::SecretKey::generate(crate::signing::Algorithm::P256);
    std::fs::write(dir.path().join("vendor.pub"), key.public().to_pem()).unwrap();
    let plugin = |component: &str, pin: &str, extra: &str| {
        format!(
            "[[plugin]]\nname = \"crm\"\ncomponent = \"{component}\"\n{pin}{extra}\n[[plugin.tool]]\nname = \"crm_contact_get\"\nrisk = \"read\"\n"
        )
    };
    let trust = "[[trust]]\nname = \"vendor\"\nkey = \"vendor.pub\"\n";
    let registry =
        "[[registry]]\nhost = \"registry.example.com\"\ncredential = \"registry_login\"\n";
    let parse = |text: &str| Manifest::parse(Path::new("m.toml"), dir.path(), text);

    let text = plugin(
        "oci://registry.example.com/tools/crm:1.2",
        "",
        "signed_by = [\"vendor\"]\n",
    ) + trust
        + registry;
    let m = parse(&text).unwrap();
    let ComponentSource::Oci(reference) = &m.plugins[0].component else {
        panic!("not a registry component")
    };
    assert_eq!(reference.tag.as_deref(), Some("1.2"));
    assert_eq!(m.plugins[0].sha256, None);
    assert_eq!(m.plugins[0].signed_by, ["vendor"]);
    assert_eq!(m.trust[0].key, key.public());
    let reached = m.registry("registry.example.com");
    assert_eq!(reached.credential.unwrap().as_str(), "registry_login");
    assert!(!m.registry("ghcr.io").plain_http);

    for (text, says) in [
        (plugin("crm.wasm", "", ""), "has no sha256 pin"),
        (
            plugin("oci://registry.example.com/crm", "", ""),
            "neither a tag nor a digest",
        ),
        (
            plugin(
                "crm.wasm",
                &format!("sha256 = \"{}\"\n", "0".repeat(64)),
                "signed_by = [\"a\", \"a\"]\n",
            ),
            "empty or repeated",
        ),
        (
            format!("{trust}[[trust]]\nname = \"x\"\nkey = \"missing.pub\"\n"),
            "missing.pub",
        ),
        (format!("{trust}{trust}"), "repeated"),
        (format!("{registry}{registry}"), "repeated"),
    ] {
        let error = parse(&text).unwrap_err().to_string();
        assert!(error.contains(says), "{says}: {error}");
    }
}
