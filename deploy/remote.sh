#!/usr/bin/env bash
# Runs ON the VM, as root: install a release bundle and switch to it behind a health gate,
# or roll back to the previous release. Idempotent: run it again and it converges.
#
#   remote.sh install BUNDLE.tar.gz [options]
#   remote.sh rollback [options]
#   remote.sh stop [options]
#
# Options:
#   --prefix DIR         install under DIR (DIR/opt/probboard, DIR/etc/probboard): tests
#   --no-systemd         no systemctl, no system user, no apt: start the processes with the
#                        exact commands of the unit files (tests, containers)
#   --env-defaults FILE  lines for the env file when it is first created (the secrets they
#                        do not define are generated)
#   --health-timeout S   how long the health gate waits (default 60)
set -euo pipefail

ACTION=${1:-}
shift || true
BUNDLE=""
if [[ "$ACTION" == "install" ]]; then
  BUNDLE=${1:-}
  shift || true
fi
PREFIX=""
SYSTEMD=1
ENV_DEFAULTS=""
HEALTH_TIMEOUT=60
while (($#)); do
  case "$1" in
    --prefix) PREFIX=$(realpath -m "$2"); shift 2 ;;
    --no-systemd) SYSTEMD=0; shift ;;
    --env-defaults) ENV_DEFAULTS=$2; shift 2 ;;
    --health-timeout) HEALTH_TIMEOUT=$2; shift 2 ;;
    *) echo "deploy: unknown option $1" >&2; exit 2 ;;
  esac
done

ROOT="$PREFIX/opt/probboard"
ETC="$PREFIX/etc/probboard"
ENV_FILE="$ETC/probboard.env"
UNITS="$PREFIX/etc/systemd/system"
RUN="$PREFIX/run/probboard"
LOGS="$PREFIX/var/log/probboard"
KEEP_RELEASES=5
ALERTS_WORKERS_DEFAULT=2

log() { echo "deploy: $*"; }
die() { echo "deploy: $*" >&2; exit 1; }

random_secret() { python3 -c 'import secrets; print(secrets.token_urlsafe(48))'; }

env_file_value() {  # env_file_value FILE NAME: NAME's value in FILE, read as with-env.py reads it
  # (with-env.py's own reading, inline: remote.sh is shipped alone and runs this before any
  # release, with its with-env.py, is unpacked on the host)
  python3 - "$1" "$2" <<'PY'
import sys
path, name = sys.argv[1:]
value = ""
with open(path, encoding="utf-8") as handle:
    for raw in handle:
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        key, text = line.split("=", 1)
        text = text.strip()
        if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
            text = text[1:-1]
        if key.strip() == name:
            value = text  # the last one counts, as for systemd
print(value.strip())
PY
}

env_value() {  # env_value NAME DEFAULT: a value from the env file
  local value
  value=$(sed -n "s/^$1=//p" "$ENV_FILE" | tail -n 1)
  echo "${value:-$2}"
}

ensure_user() {
  ((SYSTEMD)) || return 0
  id probboard >/dev/null 2>&1 || useradd --system --home-dir /opt/probboard --shell /usr/sbin/nologin probboard
}

ensure_env_file() {
  mkdir -p "$ETC"
  if [[ -f "$ENV_FILE" ]]; then
    log "keeping $ENV_FILE"
    return
  fi
  # The secrets the defaults (SHARED_ENV) do not give are made here, once: with several
  # hosts the defaults give both (ship-hosts.sh insists), so every host has the same.
  local generated=() name
  for name in SECRET_KEY API_KEY_PEPPER; do
    if [[ -z "$ENV_DEFAULTS" || -z "$(env_file_value "$ENV_DEFAULTS" "$name")" ]]; then
      generated+=("$name")
    fi
  done
  log "creating $ENV_FILE${generated[*]:+ with new ${generated[*]}} (it is never overwritten)"
  (
    umask 077
    {
      echo "# Probboard settings, created by deploy $(date -u +%FT%TZ). Never overwritten."
      for name in "${generated[@]}"; do
        echo "$name=$(random_secret)"
      done
      if [[ -n "$ENV_DEFAULTS" && ${#generated[@]} -eq 0 ]]; then
        cat "$ENV_DEFAULTS"
      elif [[ -n "$ENV_DEFAULTS" ]]; then
        # Without the defaults' empty lines for a generated secret: one line per variable.
        grep -Ev "^[[:space:]]*($(IFS='|'; echo "${generated[*]}"))[[:space:]]*=" "$ENV_DEFAULTS" || true
      else
        echo "REDIS_URL=redis://127.0.0.1:6379/0"
        echo "DATABASE_URL=postgresql://probboard:$(random_secret | tr -dc 'A-Za-z0-9' | head -c 32)@127.0.0.1:5432/probboard"
        echo "HOST=127.0.0.1"
        echo "PORT=8000"
        # Only the nginx on this VM may say who the client is (docs/deploy.md: list the
        # private network's nginx hosts here when they are elsewhere).
        echo "TRUSTED_PROXIES=127.0.0.1/32,::1/128"
        echo "LOG_FORMAT=json"
      fi
    } >"$ENV_FILE"
  )
  if ((SYSTEMD)); then
    chown root:probboard "$ENV_FILE"
    chmod 640 "$ENV_FILE"
  fi
}

upgrade_env_file() {  # the old bare TRUSTED_PROXIES=N, rewritten where that keeps its meaning
  python3 - "$ENV_FILE" <<'PY'
import ipaddress, os, re, sys, tempfile
path = sys.argv[1]
with open(path, encoding="utf-8") as handle:
    lines = handle.read().splitlines(keepends=True)
values, at = {}, {}
for number, raw in enumerate(lines):
    line = raw.strip()
    if not line or line.startswith("#") or "=" not in line:
        continue
    key, value = line.split("=", 1)
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        value = value[1:-1]
    values[key.strip()], at[key.strip()] = value.strip(), number
old = values.get("TRUSTED_PROXIES", "")
if not re.fullmatch(r"[0-9]{1,2}", old) or not 1 <= int(old) <= 10:
    sys.exit(0)  # networks already, 0 (nobody), or a bad value the service names itself
host = values.get("HOST", "") or "127.0.0.1"
try:
    loopback = host == "localhost" or ipaddress.ip_address(host.strip("[]")).is_loopback
except ValueError:
    loopback = False
if not loopback:
    print(f"deploy: TRUSTED_PROXIES={old} (the old hop count) kept in {path}: HOST={host} is "
          "not loopback, so the web service refuses it; list the nginx hosts' networks there "
          "(docs/deploy.md)")
    sys.exit(0)
if values.get("TRUSTED_PROXY_HOPS"):
    sys.exit(0)  # both set: the service refuses the pair, naming it
new = "TRUSTED_PROXIES=127.0.0.1/32,::1/128\n"
if int(old) > 1:
    new += f"TRUSTED_PROXY_HOPS={old}\n"
lines[at["TRUSTED_PROXIES"]] = new
status = os.stat(path)
folder = os.path.dirname(path)
with tempfile.NamedTemporaryFile("w", dir=folder, delete=False, encoding="utf-8") as handle:
    handle.write("".join(lines))
os.chmod(handle.name, status.st_mode & 0o7777)
if os.geteuid() == 0:
    os.chown(handle.name, status.st_uid, status.st_gid)
os.replace(handle.name, path)
print(f"deploy: rewrote TRUSTED_PROXIES={old} (the old hop count) in {path} as "
      f"{new.strip().replace(chr(10), ' ')}: HOST={host} is loopback, the nginx on this VM")
PY
}

alerts_workers() {  # ALERTS_WORKERS of the env file: this host's delivery workers
  local count
  count=$(env_file_value "$ENV_FILE" ALERTS_WORKERS)
  count=${count:-$ALERTS_WORKERS_DEFAULT}
  [[ "$count" =~ ^[0-9]{1,2}$ ]] && ((10#$count <= 32)) ||
    die "ALERTS_WORKERS=$count in $ENV_FILE: give a whole number of alert delivery workers, 0 to 32"
  echo $((10#$count))
}

load_services() {  # SERVICES: the units the current release runs on this host
  local count i
  SERVICES=(probboard-web probboard-refresher)
  # A release from before the alerts (a rollback) has no alerts units: it runs without them.
  [[ -f "$ROOT/current/deploy/probboard-alerts.service" ]] || return 0
  case "$(env_file_value "$ENV_FILE" ALERTS | tr '[:upper:]' '[:lower:]')" in
    0 | false | no | off) return 0 ;;  # ALERTS=false: nothing to evaluate or deliver
  esac
  count=$(alerts_workers) || exit 1
  SERVICES+=(probboard-alerts)
  for ((i = 1; i <= count; i++)); do
    SERVICES+=("probboard-alerts-worker@$i")
  done
}

unit_file() {  # the unit file of a service: an instance's is its template's
  if [[ "$1" == *@* ]]; then echo "${1%%@*}@.service"; else echo "$1.service"; fi
}

is_local() { [[ "$1" == *"@127.0.0.1"* || "$1" == *"@localhost"* || "$1" == *"//127.0.0.1"* || "$1" == *"//localhost"* ]]; }

ensure_backing_services() {
  ((SYSTEMD)) || return 0
  local redis_url database_url
  redis_url=$(env_value REDIS_URL "")
  database_url=$(env_value DATABASE_URL "")
  local wanted=()
  if is_local "$redis_url" && ! command -v redis-server >/dev/null; then wanted+=(redis-server); fi
  if [[ "$database_url" == postgresql* ]] && is_local "$database_url" && ! command -v pg_ctlcluster >/dev/null; then
    wanted+=(postgresql)
  fi
  if ((${#wanted[@]})); then
    log "installing ${wanted[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${wanted[@]}"
  fi
  if is_local "$redis_url"; then systemctl enable --now redis-server >/dev/null; fi
  if [[ "$database_url" == postgresql* ]] && is_local "$database_url"; then
    systemctl enable --now postgresql >/dev/null
    # Role and database from the URL, created once.
    read -r user password dbname < <(python3 - "$database_url" <<'PY'
import sys
from urllib.parse import urlsplit
u = urlsplit(sys.argv[1])
print(u.username or "probboard", u.password or "", (u.path or "/probboard").lstrip("/"))
PY
)
    runuser -u postgres -- psql -qtAc "SELECT 1 FROM pg_roles WHERE rolname='$user'" | grep -q 1 ||
      runuser -u postgres -- psql -qc "CREATE ROLE \"$user\" LOGIN PASSWORD '$password'"
    runuser -u postgres -- psql -qtAc "SELECT 1 FROM pg_database WHERE datname='$dbname'" | grep -q 1 ||
      runuser -u postgres -- psql -qc "CREATE DATABASE \"$dbname\" OWNER \"$user\""
  fi
}

with_env() {  # run a command with the env file's variables (read as systemd reads them)
  python3 "$ROOT/current.tools/with-env.py" "$ENV_FILE" "$@"
}

as_service_user() {  # the same, as the service user
  if ((SYSTEMD)); then
    runuser -u probboard -- python3 "$ROOT/current.tools/with-env.py" "$ENV_FILE" "$@"
  else
    with_env "$@"
  fi
}

install_release() {
  [[ -f "$BUNDLE" ]] || die "no bundle at '$BUNDLE'"
  local version
  version=$(tar -tzf "$BUNDLE" | sed -n '1s#/.*##p')
  [[ "$version" =~ ^[0-9]{14}-[A-Za-z0-9]+$ ]] || die "bundle $BUNDLE has no release directory"
  RELEASE="$ROOT/releases/$version"
  mkdir -p "$ROOT/releases"
  if [[ -x "$RELEASE/venv/bin/gunicorn" ]]; then
    log "release $version already installed"
  else
    rm -rf "$RELEASE"
    tar -xzf "$BUNDLE" -C "$ROOT/releases"
    python3 -m venv "$RELEASE/venv"
    "$RELEASE/venv/bin/pip" install --quiet --no-index --find-links "$RELEASE/wheels" probboard
    log "installed release $version"
  fi
  # The deploy tools of the newest release, where every step can find them.
  rm -rf "$ROOT/current.tools"
  cp -r "$RELEASE/deploy" "$ROOT/current.tools"
  if ((SYSTEMD)); then
    chown -R root:root "$RELEASE"
    chmod -R go-w "$RELEASE"
  fi
}

migrate() {
  log "migrating the database"
  (cd "$1" && as_service_user "$1/venv/bin/flask" --app wsgi db upgrade) || return 1
  # The track record's closed months summed now, not by the first visitor (a failure here
  # costs only that: the first answer sums them).
  (cd "$1" && as_service_user "$1/venv/bin/flask" --app wsgi record keep) \
    || log "the track record's closed months were not kept now; the first answer will"
}

install_units() {
  if ((SYSTEMD)); then
    local unit extra
    for unit in "$1"/deploy/probboard-*.service; do
      install -m 644 "$unit" "$UNITS/"
    done
    systemctl daemon-reload
    systemctl enable "${SERVICES[@]}" >/dev/null
    # Units this release does not run (workers beyond a lowered ALERTS_WORKERS, the alerts
    # after a rollback past them): stopped and no longer started at boot.
    for extra in $(systemctl list-units --all --plain --no-legend 'probboard-*' |
      awk '{print $1}' | sed 's/\.service$//'); do
      [[ " ${SERVICES[*]} " == *" $extra "* ]] && continue
      systemctl disable --now "$extra" >/dev/null 2>&1 || true
    done
  fi
}

unit_command() {  # the ExecStart of a unit, with this install's paths
  sed -n 's/^ExecStart=//p' "$ROOT/current/deploy/$(unit_file "$1")" |
    sed "s#/opt/probboard#$ROOT#g; s#/etc/probboard#$ETC#g"
}

stop_services() {
  if ((SYSTEMD)); then
    local unit
    # One at a time: a unit this host never had (the alerts before their first deploy) is
    # only that unit's error.
    for unit in probboard-web probboard-refresher probboard-alerts 'probboard-alerts-worker@*'; do
      systemctl stop "$unit" 2>/dev/null || true
    done
    return
  fi
  local file pid
  # Every process started here, also those of a worker count since lowered.
  for file in "$RUN"/probboard-*.pid; do
    [[ -f "$file" ]] || continue
    pid=$(cat "$file")
    if kill -TERM "$pid" 2>/dev/null; then
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
      kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$file"
  done
}

start_services() {
  if ((SYSTEMD)); then
    systemctl restart "${SERVICES[@]}"
    return
  fi
  mkdir -p "$RUN" "$LOGS"
  local service command
  for service in "${SERVICES[@]}"; do
    command=$(unit_command "$service")
    (
      cd "$ROOT/current"
      # shellcheck disable=SC2086 # the unit's command line, split as systemd splits it
      exec python3 "$ROOT/current.tools/with-env.py" "$ENV_FILE" setsid $command >>"$LOGS/$service.log" 2>&1
    ) &
    echo $! >"$RUN/$service.pid"
  done
}

switch_to() {  # point `current` at a release directory name
  ln -sfn "releases/$1" "$ROOT/current.new"
  mv -T "$ROOT/current.new" "$ROOT/current"
}

healthy() {  # health answers and the board is fresh, within the timeout
  local port
  port=$(env_value PORT 8000)
  local web_pid=""
  if ((SYSTEMD)); then
    web_pid=$(systemctl show -p MainPID --value probboard-web 2>/dev/null || true)
  elif [[ -f "$RUN/probboard-web.pid" ]]; then
    web_pid=$(cat "$RUN/probboard-web.pid")
  fi
  python3 - "$port" "$HEALTH_TIMEOUT" "${web_pid:-0}" <<'PY' || return 1
import json, os, sys, time, urllib.request
port, timeout, pid = sys.argv[1], float(sys.argv[2]), int(sys.argv[3] or 0)
base = f"http://127.0.0.1:{port}"
deadline, why = time.monotonic() + timeout, "no answer"
while time.monotonic() < deadline:
    if pid > 0:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            why = "the web process exited (see its log)"
            break
    try:
        with urllib.request.urlopen(base + "/api/health", timeout=2) as r:
            health = json.load(r)
        with urllib.request.urlopen(base + "/api/probboard/latest", timeout=2) as r:
            board = json.load(r)
        if not health.get("redisReady"):
            why = f"redis not ready: {health.get('redisStatus')}"
        elif not board.get("items") or board.get("latencyLevel") != "ok":
            why = f"no fresh board (latencyLevel {board.get('latencyLevel')})"
        else:
            print("deploy: healthy: board fresh, redis ready")
            sys.exit(0)
    except Exception as exc:  # not up yet
        why = f"{type(exc).__name__}: {exc}"
    time.sleep(0.5)
print(f"deploy: health gate failed: {why}", file=sys.stderr)
sys.exit(1)
PY
  running || return 1
}

running() {  # every other service of the release still runs once the board is fresh
  local service pid
  for service in "${SERVICES[@]}"; do
    [[ "$service" == probboard-web ]] && continue
    if ((SYSTEMD)); then
      systemctl is-active --quiet "$service" && continue
    else
      pid=$(cat "$RUN/$service.pid" 2>/dev/null || echo 0)
      kill -0 "$pid" 2>/dev/null && continue
    fi
    echo "deploy: health gate failed: $service is not running (see its log)" >&2
    return 1
  done
}

prune() {
  ls -1 "$ROOT/releases" | sort | head -n -"$KEEP_RELEASES" | while read -r old; do
    [[ "$ROOT/releases/$old" == "$(readlink -f "$ROOT/current")" ]] && continue
    rm -rf "${ROOT:?}/releases/$old"
  done
}

activate() {  # switch to release $1 (previous: $2), restart, gate; roll back on failure
  local target=$1 previous=$2
  stop_services
  switch_to "$target"
  load_services
  install_units "$ROOT/current"
  start_services
  if healthy; then
    log "release $target is live"
    return 0
  fi
  if [[ -z "$previous" ]]; then
    stop_services
    die "release $target failed its health gate and there is no previous release"
  fi
  log "release $target failed its health gate: switching back to $previous"
  stop_services
  switch_to "$previous"
  load_services
  install_units "$ROOT/current"
  start_services
  healthy || log "the previous release $previous is not healthy either"
  die "deploy of $target failed; $previous restored"
}

case "$ACTION" in
  install)
    ensure_user
    ensure_env_file
    upgrade_env_file
    alerts_workers >/dev/null  # a bad count stops the deploy here, nothing switched
    ensure_backing_services
    install_release
    previous=$(basename "$(readlink "$ROOT/current" 2>/dev/null || true)" 2>/dev/null || true)
    migrate "$RELEASE" || die "migrations of $(basename "$RELEASE") failed; still on ${previous:-nothing}"
    activate "$(basename "$RELEASE")" "${previous:-}"
    prune
    ;;
  rollback)
    [[ -d "$ROOT/current.tools" ]] || cp -r "$ROOT/current/deploy" "$ROOT/current.tools"
    current=$(basename "$(readlink "$ROOT/current" 2>/dev/null)" 2>/dev/null) || die "nothing is deployed"
    previous=$(ls -1 "$ROOT/releases" | sort | grep -B1 -x "$current" | head -n 1)
    [[ -n "$previous" && "$previous" != "$current" ]] || die "no release before $current"
    alerts_workers >/dev/null
    log "rolling back from $current to $previous"
    activate "$previous" "$current"
    ;;
  stop)
    stop_services
    log "stopped"
    ;;
  *)
    echo "usage: remote.sh install BUNDLE.tar.gz [--prefix DIR] [--no-systemd] [--env-defaults FILE]" >&2
    echo "       remote.sh rollback|stop [--prefix DIR] [--no-systemd]" >&2
    exit 2
    ;;
esac
