#!/usr/bin/env bash
# Deploy one bundle to several hosts in turn, each behind its own health gate:
#   ship-hosts.sh BUNDLE HOST [HOST...]
# A host whose new release fails its gate is rolled back there (remote.sh) and the rollout
# stops: the hosts after it keep the release they run, so the service stays up on them.
# Every host runs a web server and a refresher; the refreshers share the lease, one leads.
# SHARED_ENV (a local file) seeds each host's env file when it is first created: several
# hosts must share SECRET_KEY, API_KEY_PEPPER, REDIS_URL and DATABASE_URL, so with more than
# one host SHARED_ENV is required and must define both secrets (else each new host would
# make its own, and accept a different set of keys).
set -euo pipefail
bundle=${1:?usage: ship-hosts.sh BUNDLE HOST [HOST...]}
shift
(($#)) || { echo "usage: ship-hosts.sh BUNDLE HOST [HOST...]" >&2; exit 2; }
if (($# > 1)); then
  if [[ -z "${SHARED_ENV:-}" || ! -f "${SHARED_ENV:-}" ]]; then
    echo "deploy: $# hosts need SHARED_ENV, an env file with the SECRET_KEY and API_KEY_PEPPER they share (docs/deploy.md)${SHARED_ENV:+; $SHARED_ENV is not a file}" >&2
    exit 2
  fi
  python=$(command -v python3)
  for name in SECRET_KEY API_KEY_PEPPER; do
    # Read as the hosts read it (with-env.py, nothing from this shell's environment).
    value=$("$python" "$(dirname "$0")/with-env.py" "$SHARED_ENV" --value "$name")
    if [[ -z "$value" ]]; then
      echo "deploy: SHARED_ENV=$SHARED_ENV does not define $name: $# hosts must share it (docs/deploy.md)" >&2
      exit 2
    fi
  done
fi
done_hosts=()
for host in "$@"; do
  echo "deploy: --- $host ($(( ${#done_hosts[@]} + 1 )) of $#)"
  if ! bash "$(dirname "$0")/ship.sh" "$host" "$bundle"; then
    echo "deploy: stopped at $host; done: ${done_hosts[*]:-none}; not touched: the rest" >&2
    exit 1
  fi
  done_hosts+=("$host")
done
echo "deploy: every host is live: ${done_hosts[*]}"
