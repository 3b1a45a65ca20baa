//! The Python and JavaScript scaffolds: their files (the SDK and `wit/`
//! copied from this binary) and their builds (componentize-py,
//! componentize-js).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::ScaffoldError;

const WIT: &str = include_str!("../../../wit/plugin.wit");

const PY_APP: &str = include_str!("template/python/app.py.tmpl");
const PY_TEST: &str = include_str!("template/python/test_app.py.tmpl");
const PY_README: &str = include_str!("template/python/README.md.tmpl");
const PY_GITIGNORE: &str = include_str!("template/python/gitignore.tmpl");
/// The Python SDK, file by file, as plugins/sdk-python ships it.
const PY_SDK: [(&str, &str); 10] = [
    (
        "__init__.py",
        include_str!("../../../plugins/sdk-python/toolhost/__init__.py"),
    ),
    (
        "_errors.py",
        include_str!("../../../plugins/sdk-python/toolhost/_errors.py"),
    ),
    (
        "_host.py",
        include_str!("../../../plugins/sdk-python/toolhost/_host.py"),
    ),
    (
        "_plugin.py",
        include_str!("../../../plugins/sdk-python/toolhost/_plugin.py"),
    ),
    (
        "_schema.py",
        include_str!("../../../plugins/sdk-python/toolhost/_schema.py"),
    ),
    (
        "config.py",
        include_str!("../../../plugins/sdk-python/toolhost/config.py"),
    ),
    (
        "http.py",
        include_str!("../../../plugins/sdk-python/toolhost/http.py"),
    ),
    (
        "log.py",
        include_str!("../../../plugins/sdk-python/toolhost/log.py"),
    ),
    (
        "state.py",
        include_str!("../../../plugins/sdk-python/toolhost/state.py"),
    ),
    (
        "testing.py",
        include_str!("../../../plugins/sdk-python/toolhost/testing.py"),
    ),
];

const JS_TOOLS: &str = include_str!("template/js/tools.js.tmpl");
const JS_APP: &str = include_str!("template/js/app.js.tmpl");
const JS_TEST: &str = include_str!("template/js/tools.test.js.tmpl");
const JS_PACKAGE: &str = include_str!("template/js/package.json.tmpl");
const JS_README: &str = include_str!("template/js/README.md.tmpl");
const JS_GITIGNORE: &str = include_str!("template/js/gitignore.tmpl");
/// The JavaScript SDK, as plugins/sdk-js ships it.
const JS_SDK: [(&str, &str); 3] = [
    (
        "toolhost.js",
        include_str!("../../../plugins/sdk-js/toolhost.js"),
    ),
    (
        "component.js",
        include_str!("../../../plugins/sdk-js/component.js"),
    ),
    (
        "testing.js",
        include_str!("../../../plugins/sdk-js/testing.js"),
    ),
];

/// The files of a Python plugin project, templates filled by `fill`.
pub(super) fn python_files(fill: impl Fn(&str) -> String) -> Vec<(String, String)> {
    let mut files = named(vec![
        ("app.py", fill(PY_APP)),
        ("test_app.py", fill(PY_TEST)),
        ("README.md", fill(PY_README)),
        (".gitignore", fill(PY_GITIGNORE)),
        ("wit/plugin.wit", WIT.to_string()),
    ]);
    files.extend(sdk_files("toolhost", &PY_SDK));
    files
}

/// The files of a JavaScript plugin project, templates filled by `fill`.
pub(super) fn js_files(fill: impl Fn(&str) -> String) -> Vec<(String, String)> {
    let mut files = named(vec![
        ("tools.js", fill(JS_TOOLS)),
        ("app.js", fill(JS_APP)),
        ("tools.test.js", fill(JS_TEST)),
        ("package.json", fill(JS_PACKAGE)),
        ("README.md", fill(JS_README)),
        (".gitignore", fill(JS_GITIGNORE)),
        ("wit/plugin.wit", WIT.to_string()),
    ]);
    files.extend(sdk_files("sdk", &JS_SDK));
    files
}

fn named(files: Vec<(&str, String)>) -> Vec<(String, String)> {
    files
        .into_iter()
        .map(|(file, text)| (file.to_string(), text))
        .collect()
}

/// The SDK's files under `folder/` of the project.
fn sdk_files<'a>(
    folder: &'a str,
    files: &'a [(&'a str, &'a str)],
) -> impl Iterator<Item = (String, String)> + 'a {
    files
        .iter()
        .map(move |(file, text)| (format!("{folder}/{file}"), (*text).to_string()))
}

/// Builds the Python project in `dir` into `component` (relative to `dir`)
/// with componentize-py.
pub fn build_python(dir: &Path, component: &Path) -> Result<PathBuf, ScaffoldError> {
    let args = [
        "-d",
        "wit",
        "-w",
        "plugin",
        "componentize",
        "app",
        "-p",
        ".",
    ];
    run(
        dir,
        "componentize-py",
        "install it with `pip install componentize-py==0.25.1`",
        Command::new("componentize-py")
            .args(args)
            .arg("-o")
            .arg(component),
    )?;
    Ok(std::path::absolute(dir.join(component)).unwrap_or_else(|_| dir.join(component)))
}

/// Builds the JavaScript project in `dir` into `component` (relative to
/// `dir`) with componentize-js.
pub fn build_js(dir: &Path, component: &Path) -> Result<PathBuf, ScaffoldError> {
    run(
        dir,
        "componentize-js",
        "install it with `npm install -g @bytecodealliance/componentize-js@0.23.0` (Node.js 22 or newer)",
        Command::new("componentize-js")
            .args(["app.js", "--wit", "wit", "--world-name", "plugin", "-o"])
            .arg(component),
    )?;
    Ok(std::path::absolute(dir.join(component)).unwrap_or_else(|_| dir.join(component)))
}

fn run(
    dir: &Path,
    tool: &'static str,
    install: &'static str,
    command: &mut Command,
) -> Result<(), ScaffoldError> {
    // The tool's own output goes to stderr: stdout carries the manifest
    // block a script may capture.
    let status = command
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(std::io::stderr())
        .stderr(Stdio::inherit())
        .status()
        .map_err(|source| ScaffoldError::Toolchain {
            tool,
            install,
            source,
        })?;
    if !status.success() {
        return Err(ScaffoldError::ToolFailed {
            tool,
            dir: dir.to_path_buf(),
        });
    }
    Ok(())
}
