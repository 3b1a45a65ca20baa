//! `toolhost plugin new`: the project an outside author starts from — one
//! read tool and one write tool on the guest SDK of their language, a test
//! they run locally, and a README — built into a component, with the
//! manifest block to paste.
//!
//! Rust projects use the SDK crate of a toolhost checkout by path. Python
//! and JavaScript projects get their SDK and `wit/` copied in, from this
//! binary, so they build anywhere componentize-py or componentize-js runs.
//! It writes only inside the new folder and refuses one that is not empty.

mod polyglot;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::manifest::{PluginName, Sha256Digest};

const CARGO_TOML: &str = include_str!("template/rust/Cargo.toml.tmpl");
const LIB_RS: &str = include_str!("template/rust/lib.rs.tmpl");
const README: &str = include_str!("template/rust/README.md.tmpl");
const GITIGNORE: &str = include_str!("template/rust/gitignore.tmpl");

/// The language a plugin is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Lang {
    /// Rust, on the `toolhost-sdk` crate (plugins/sdk), built by cargo.
    Rust,
    /// Python, on the `toolhost` package (plugins/sdk-python), built by componentize-py.
    Python,
    /// JavaScript, on plugins/sdk-js, built by componentize-js.
    Js,
}

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
    #[error("{tool} is not installed or not on PATH ({source}); {install}")]
    Toolchain {
        tool: &'static str,
        install: &'static str,
        source: std::io::Error,
    },
    #[error("{tool} failed (see above); fix what it names and build again in {dir}")]
    ToolFailed { tool: &'static str, dir: PathBuf },
}

/// The SDK of the checkout this binary was built from, if it is still there.
pub fn default_sdk() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../plugins/sdk")
}

/// Where a plugin's build puts its component, relative to its folder.
pub fn component_path(name: &PluginName, lang: Lang) -> PathBuf {
    match lang {
        Lang::Rust => PathBuf::from(format!("target/wasm32-wasip2/release/{name}.wasm")),
        Lang::Python | Lang::Js => PathBuf::from(format!("{name}.wasm")),
    }
}

/// Writes the project for plugin `name` in `lang` into `dir`; `sdk` is the
/// Rust SDK crate (unused for the other languages, whose SDK is copied in).
pub fn write(dir: &Path, name: &PluginName, lang: Lang, sdk: &Path) -> Result<(), ScaffoldError> {
    let sdk = match lang {
        Lang::Rust => std::fs::canonicalize(sdk)
            .ok()
            .filter(|s| s.join("Cargo.toml").is_file())
            .ok_or_else(|| ScaffoldError::NoSdk(sdk.to_path_buf()))?,
        Lang::Python | Lang::Js => PathBuf::new(),
    };
    if dir.exists() && std::fs::read_dir(dir).map_or(true, |mut d| d.next().is_some()) {
        return Err(ScaffoldError::NotEmpty(dir.to_path_buf()));
    }
    let fill = |template: &str| {
        template
            .replace("{{name}}", name.as_str())
            .replace("{{sdk}}", &toml_string(&sdk.display().to_string()))
            .replace(
                "{{wasm}}",
                &component_path(name, lang).display().to_string(),
            )
    };
    let files: Vec<(String, String)> = match lang {
        Lang::Rust => [
            ("Cargo.toml", CARGO_TOML),
            ("src/lib.rs", LIB_RS),
            ("README.md", README),
            (".gitignore", GITIGNORE),
        ]
        .into_iter()
        .map(|(file, template)| (file.to_string(), fill(template)))
        .collect(),
        Lang::Python => polyglot::python_files(fill),
        Lang::Js => polyglot::js_files(fill),
    };
    for (file, contents) in files {
        let path = dir.join(file);
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&path, contents));
        written.map_err(|source| ScaffoldError::Write { path, source })?;
    }
    Ok(())
}

/// Builds the project in `dir` and returns the component file.
pub fn build(dir: &Path, name: &PluginName, lang: Lang) -> Result<PathBuf, ScaffoldError> {
    match lang {
        Lang::Rust => build_rust(dir, name),
        Lang::Python => polyglot::build_python(dir, &component_path(name, lang)),
        Lang::Js => polyglot::build_js(dir, &component_path(name, lang)),
    }
}

/// Builds the crate in `dir` for wasm32-wasip2 (release) and returns the
/// component file, wherever cargo's target directory is.
fn build_rust(dir: &Path, name: &PluginName) -> Result<PathBuf, ScaffoldError> {
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
