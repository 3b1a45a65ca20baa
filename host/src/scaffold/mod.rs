//! `toolhost plugin new`: the crate an outside author starts from — one read
//! tool and one write tool on the guest SDK, a test, and a README — built
//! into a component, with the manifest block to paste.
//!
//! It writes only inside the new folder and refuses one that is not empty.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::manifest::{PluginName, Sha256Digest};

const CARGO_TOML: &str = include_str!("template/Cargo.toml.tmpl");
const LIB_RS: &str = include_str!("template/lib.rs.tmpl");
const README: &str = include_str!("template/README.md.tmpl");
const GITIGNORE: &str = include_str!("template/gitignore.tmpl");

#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    #[error("{0} exists and is not empty; choose a new folder with --dir")]
    NotEmpty(PathBuf),
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("no guest SDK at {0}; pass --sdk with the plugins/sdk folder of a toolhost checkout")]
    NoSdk(PathBuf),
    #[error("cannot run cargo: {0}")]
    Cargo(std::io::Error),
    #[error(
        "the build failed (see above); `rustup target add wasm32-wasip2` if the target is missing, then `cargo build --release --target wasm32-wasip2` in {0}"
    )]
    Build(PathBuf),
    #[error("the build reported no .wasm file for {0}")]
    NoComponent(String),
}

/// The SDK of the checkout this binary was built from, if it is still there.
pub fn default_sdk() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/sdk")
}

/// Where a plugin's release build puts its component, relative to its
/// crate's folder.
pub fn component_path(name: &PluginName) -> PathBuf {
    PathBuf::from(format!("target/wasm32-wasip2/release/{name}.wasm"))
}

/// Writes the crate for plugin `name` into `dir`.
pub fn write(dir: &Path, name: &PluginName, sdk: &Path) -> Result<(), ScaffoldError> {
    let sdk = std::fs::canonicalize(sdk)
        .ok()
        .filter(|s| s.join("Cargo.toml").is_file())
        .ok_or_else(|| ScaffoldError::NoSdk(sdk.to_path_buf()))?;
    if dir.exists() && std::fs::read_dir(dir).map_or(true, |mut d| d.next().is_some()) {
        return Err(ScaffoldError::NotEmpty(dir.to_path_buf()));
    }
    let fill = |template: &str| {
        template
            .replace("{{name}}", name.as_str())
            .replace("{{sdk}}", &toml_string(&sdk.display().to_string()))
            .replace("{{wasm}}", &component_path(name).display().to_string())
    };
    for (file, template) in [
        ("Cargo.toml", CARGO_TOML),
        ("src/lib.rs", LIB_RS),
        ("README.md", README),
        (".gitignore", GITIGNORE),
    ] {
        let path = dir.join(file);
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&path, fill(template)));
        written.map_err(|source| ScaffoldError::Write { path, source })?;
    }
    Ok(())
}

/// Builds the crate in `dir` for wasm32-wasip2 (release) and returns the
/// component file, wherever cargo's target directory is.
pub fn build(dir: &Path, name: &PluginName) -> Result<PathBuf, ScaffoldError> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "build",
            "--release",
            "--target",
            "wasm32-wasip2",
            "--message-format=json-render-diagnostics",
        ])
        .current_dir(dir)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(ScaffoldError::Cargo)?;
    if !out.status.success() {
        return Err(ScaffoldError::Build(dir.to_path_buf()));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == name.as_str())
        .flat_map(|m| {
            m["filenames"]
                .as_array()
                .cloned()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|f| f.as_str().map(PathBuf::from))
        })
        .find(|f| f.extension().is_some_and(|e| e == "wasm"))
        .ok_or_else(|| ScaffoldError::NoComponent(name.to_string()))
}

/// The `[[plugin]]` block that declares the scaffolded plugin.
pub fn manifest_block(
    name: &PluginName,
    component: &Path,
    sha256: Option<&Sha256Digest>,
) -> String {
    let sha256 = sha256.map_or_else(
        || "build it, then run `toolhost pin` or `toolhost plugin inspect`".to_string(),
        ToString::to_string,
    );
    format!(
        "[[plugin]]\n\
         name = \"{name}\"\n\
         component = {component}\n\
         sha256 = \"{sha256}\"\n\
         instance = \"call\"\n\
         \n\
         [[plugin.tool]]\n\
         name = \"{name}_item_get\"\n\
         risk = \"read\"\n\
         \n\
         [[plugin.tool]]\n\
         name = \"{name}_item_save\"\n\
         risk = \"write\"\n",
        component = toml_string(&component.display().to_string()),
    )
}

/// `text` as a TOML basic string, quoted and escaped.
fn toml_string(text: &str) -> String {
    toml::Value::String(text.to_string()).to_string()
}
