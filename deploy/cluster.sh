#!/usr/bin/env bash
# Three toolhost replicas serving tools-manifest.toml from one shared,
# throwaway PostgreSQL, behind haproxy (deploy/haproxy.cfg), all on loopback.
# `just cluster` builds what it needs and runs this.
#
# Everything it creates lives in target/cluster/, which is wiped at start:
#   pg/                    the PostgreSQL data directory (its log: pg/log)
#   replica-N/             each replica's state_dir (audit trail, component cache)
#   replica-N.log          each replica's output
#   operator/              the state_dir for operator commands (their audit trail)
#   haproxy.log, crm.log
# It prints the URL clients use, the admin URLs and token, the database URL
# and how to open a task, then waits; Ctrl-C (or SIGTERM) stops haproxy, the
# replicas, the demo CRM and PostgreSQL. If one of them exits on its own, the
# rest are stopped too.
#
# Environment (optional):
#   TOOLHOST_BIN      the host binary (default target/release/toolhost)
#   CRM_UPSTREAM_BIN  the demo CRM (default target/release/crm-upstream); without
#                     it the crm plugin is refused and the other tools served
# Needs the PostgreSQL server (/usr/lib/postgresql/*/bin), haproxy, python3
# and curl (`just services-setup` installs the first two). As root,
# PostgreSQL runs as the `postgres` user, since it refuses to run as root.

set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=$root/target/cluster
pgdata=$dir/pg
manifest=$root/tools-manifest.toml
toolhost=${TOOLHOST_BIN:-$root/target/release/toolhost}
crm_bin=${CRM_UPSTREAM_BIN:-$root/target/release/crm-upstream}
# The demo CRM's address is fixed by the manifest's network allow-list.
crm_addr=127.0.0.1:8788
replicas=3
# How long each replica, and haproxy, may take to come up.
start_timeout=180

say() { echo "cluster: $*" >&2; }
die() {
    say "$*"
    exit 1
}

[ -x "$toolhost" ] || die "no host binary at $toolhost (\`just build\` makes it; TOOLHOST_BIN picks another)"
# /usr/sbin is not on every user's PATH.
haproxy=$(command -v haproxy || echo /usr/sbin/haproxy)
[ -x "$haproxy" ] || die "haproxy is not installed (\`just services-setup\`)"
command -v python3 >/dev/null || die "python3 is needed to pick free ports"
command -v curl >/dev/null || die "curl is needed to see when the servers are up"
pgbins=(/usr/lib/postgresql/*/bin/pg_ctl)
[ -x "${pgbins[0]}" ] || die "no PostgreSQL server under /usr/lib/postgresql/*/bin (\`just services-setup\`)"
# The newest installed major version.
pgbin=$(printf '%s\n' "${pgbins[@]}" | sort -V | tail -n 1)
pgbin=${pgbin%/pg_ctl}

# PostgreSQL refuses to run as root: as root, run it as `postgres`.
if [ "$(id -u)" -eq 0 ]; then
    id postgres >/dev/null 2>&1 || die "running as root, but there is no postgres user to run PostgreSQL as"
    as_pg=(runuser -u postgres --)
else
    as_pg=()
fi
pg() { "${as_pg[@]}" "$pgbin/$1" "${@:2}"; }

port_free() {
    python3 -c '
import socket, sys
s = socket.socket()
s.bind(("127.0.0.1", int(sys.argv[1])))
' "$1" 2>/dev/null
}
if [ -x "$crm_bin" ] && ! port_free "${crm_addr#*:}"; then
    die "$crm_addr is in use (is \`just run\` running?); the demo CRM needs it"
fi

# A previous run that was killed outright may have left its PostgreSQL
# running on the data directory about to be wiped; pg_ctl checks the pid
# file, so this stops only that server.
if [ -f "$pgdata/postmaster.pid" ]; then
    say "stopping the PostgreSQL a previous run left in $pgdata"
    pg pg_ctl -D "$pgdata" -m immediate -w stop >/dev/null 2>&1 || true
fi
rm -rf "$dir"
mkdir -p "$dir"

# Free loopback ports: PostgreSQL, haproxy, and an MCP and an admin port per
# replica. All are bound at once so they differ; the kernel may hand one out
# again before it is used, which is unlikely on a development machine.
ports=$(python3 -c '
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))
' $((2 + 2 * replicas)))
read -r -a ports <<<"$ports"
pg_port=${ports[0]}
lb_port=${ports[1]}
http_ports=("${ports[@]:2:replicas}")
admin_ports=("${ports[@]:2+replicas:replicas}")

# 64 hex characters, as for `just run`'s demo secret.
random_hex() { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
admin_token=$(random_hex)
db_url=postgres://postgres@127.0.0.1:$pg_port/postgres

# What runs in the background, by pid, with its name.
declare -A names=()
crm_pid=
replica_pids=()
haproxy_pid=
pg_started=false

# Sends SIGTERM to the given pids at once and waits for them; what is still
# running after 20 s (a replica lets running calls finish, up to 15 s) is
# killed.
stop() {
    local pid deadline=$((SECONDS + 20))
    for pid in "$@"; do kill -TERM "$pid" 2>/dev/null; done
    for pid in "$@"; do
        while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do
            sleep 0.2
        done
        if kill -0 "$pid" 2>/dev/null; then
            say "${names[$pid]} did not stop within 20 s; killing it"
            kill -KILL "$pid" 2>/dev/null
        fi
        wait "$pid" 2>/dev/null
    done
}

# Stops everything, in order of dependence: haproxy (no new requests), the
# replicas, the CRM they call, then PostgreSQL.
stop_all() {
    local status=$?
    set +e
    trap - EXIT INT TERM
    say "stopping"
    stop ${haproxy_pid:+"$haproxy_pid"}
    stop "${replica_pids[@]}"
    stop ${crm_pid:+"$crm_pid"}
    if $pg_started; then
        pg pg_ctl -D "$pgdata" -m fast -w stop >/dev/null ||
            say "PostgreSQL did not stop; see $pgdata/log"
    fi
    say "stopped"
    exit "$status"
}
trap stop_all EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Polls CHECK... until it succeeds; gives up if process PID exits first
# (showing the end of LOG) or after start_timeout seconds.
wait_until_up() {
    local what=$1 pid=$2 log=$3
    shift 3
    local deadline=$((SECONDS + start_timeout))
    until "$@" >/dev/null 2>&1; do
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 20 "$log" >&2 || true
            die "$what exited while starting; its output is in $log"
        fi
        if ((SECONDS >= deadline)); then
            tail -n 20 "$log" >&2 || true
            die "$what is not up after ${start_timeout} s; its output is in $log"
        fi
        sleep 0.5
    done
}

# A stateless 2026-07-28 server/discover: the request haproxy's health check
# sends, answered 200 by a replica that serves MCP.
mcp_up() {
    curl -fsS -o /dev/null -m 5 -X POST "http://$1/mcp" \
        -H 'Content-Type: application/json' \
        -H 'Accept: application/json, text/event-stream' \
        -H 'MCP-Protocol-Version: 2026-07-28' \
        -H 'Mcp-Method: server/discover' \
        --data '{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}'
}

# Listing tasks reads the store, so a 200 also shows the replica reaches the
# database.
admin_up() {
    curl -fsS -o /dev/null -m 5 -H "Authorization: Bearer $admin_token" "http://$1/v1/tasks"
}

# PostgreSQL: a fresh cluster in target/cluster/pg, on loopback TCP only,
# trusting local connections (nothing else can reach it), its Unix socket in
# the data directory rather than the system's /var/run/postgresql.
say "starting PostgreSQL ($pgbin) on 127.0.0.1:$pg_port"
mkdir "$pgdata"
if [ "$(id -u)" -eq 0 ]; then
    chown postgres: "$pgdata"
    "${as_pg[@]}" test -w "$pgdata" || die "the postgres user cannot reach $pgdata (a parent directory closed to others?)"
fi
chmod 0700 "$pgdata"
pg initdb -D "$pgdata" -A trust -U postgres -E UTF8 --no-locale --no-sync >"$dir/initdb.log" 2>&1 ||
    die "initdb failed; see $dir/initdb.log"
pg_started=true
pg pg_ctl -D "$pgdata" -o "-p $pg_port -k $pgdata -c listen_addresses=127.0.0.1" \
    -l "$pgdata/log" -w -t "$start_timeout" start >/dev/null ||
    die "PostgreSQL did not start; see $pgdata/log"

# The demo CRM, as `just run` starts it, with a fresh secret that only it
# and the replicas' secret stores get.
crm_env=()
if [ -x "$crm_bin" ]; then
    crm_secret="demo-$(random_hex)"
    say "starting the demo CRM on $crm_addr"
    CRM_UPSTREAM_TOKEN="$crm_secret" "$crm_bin" --listen "$crm_addr" >"$dir/crm.log" 2>&1 &
    crm_pid=$!
    names[$crm_pid]="the demo CRM"
    crm_env=("TOOLHOST_SECRET_CRM_TOKEN=$crm_secret")
else
    say "no demo CRM at $crm_bin: the crm plugin will be refused, the other tools served"
fi

# The replicas: one database, each its own state_dir (audit trail, compiled
# components), name, MCP port and admin port; one admin token for all.
for ((i = 1; i <= replicas; i++)); do
    name=replica-$i
    http=127.0.0.1:${http_ports[i - 1]}
    admin=127.0.0.1:${admin_ports[i - 1]}
    say "starting $name: MCP at $http, admin at $admin"
    env "${crm_env[@]}" \
        TOOLHOST_STORE=postgres \
        TOOLHOST_DATABASE_URL="$db_url" \
        TOOLHOST_STATE_DIR="$dir/$name" \
        TOOLHOST_REPLICA="$name" \
        TOOLHOST_ADMIN_TOKEN="$admin_token" \
        "$toolhost" serve --manifest "$manifest" --http "$http" --admin "$admin" \
        >"$dir/$name.log" 2>&1 &
    replica_pids+=("$!")
    names[$!]=$name
done
for ((i = 1; i <= replicas; i++)); do
    wait_until_up "replica-$i" "${replica_pids[i - 1]}" "$dir/replica-$i.log" \
        mcp_up "127.0.0.1:${http_ports[i - 1]}"
    wait_until_up "replica-$i's admin API" "${replica_pids[i - 1]}" "$dir/replica-$i.log" \
        admin_up "127.0.0.1:${admin_ports[i - 1]}"
    say "replica-$i is up"
done

# haproxy, with the addresses deploy/haproxy.cfg reads from the environment.
export LB_BIND=127.0.0.1:$lb_port
for ((i = 1; i <= replicas; i++)); do
    export "REPLICA$i=127.0.0.1:${http_ports[i - 1]}"
done
"$haproxy" -c -q -f "$root/deploy/haproxy.cfg" || die "haproxy refuses deploy/haproxy.cfg"
say "starting haproxy on $LB_BIND"
"$haproxy" -db -f "$root/deploy/haproxy.cfg" >"$dir/haproxy.log" 2>&1 &
haproxy_pid=$!
names[$haproxy_pid]=haproxy
wait_until_up haproxy "$haproxy_pid" "$dir/haproxy.log" mcp_up "$LB_BIND"

rel() { echo "${1#"$PWD"/}"; }
cat <<EOF

toolhost cluster: ${replicas} replicas, one PostgreSQL, haproxy. Ctrl-C stops it all.

  MCP clients use  http://$LB_BIND/mcp
  database         $db_url
  admin token      $admin_token
EOF
for ((i = 1; i <= replicas; i++)); do
    echo "  admin API        http://127.0.0.1:${admin_ports[i - 1]}/v1   (replica-$i)"
done
cat <<EOF
  logs             $(rel "$dir")/*.log, $(rel "$pgdata")/log

Open a task for the cluster (any replica honours its token):

  TOOLHOST_STORE=postgres TOOLHOST_DATABASE_URL=$db_url TOOLHOST_STATE_DIR=$dir/operator \\
    $toolhost task open --manifest $manifest \\
    --purpose "Tidy the deploy notes" --grant notes_note_save --ttl 30m

or through an admin API:

  curl -H "Authorization: Bearer $admin_token" http://127.0.0.1:${admin_ports[0]}/v1/tasks

EOF

# Wait until Ctrl-C (the trap stops everything), or until one of the
# processes exits on its own; then stop the others.
set +e
wait -n -p gone "${!names[@]}"
status=$?
set -e
what="a process"
if [ -n "${gone:-}" ]; then what=${names[$gone]}; fi
say "$what exited (status $status); its output is in $(rel "$dir")"
exit 1
