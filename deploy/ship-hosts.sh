#!/usr/bin/env bash
# Deploy one bundle to several hosts in turn, each behind its own health gate:
#   ship-hosts.sh BUNDLE HOST [HOST...]
# A host whose new release fails its gate is rolled back there (remote.sh) and the rollout
# stops: the hosts after it keep the release they run, so the service stays up on them.
# Every host runs a web server and a refresher; the refreshers share the lease, one leads.
# SHARED_ENV (a local file) seeds each host's env file when it is first created: several
# hosts must share SECRET_KEY, API_KEY_PEPPER, REDIS_URL and DATABASE_URL.
set -euo pipefail
bundle=${1:?usage: ship-hosts.sh BUNDLE HOST [HOST...]}
shift
(($#)) || { echo "usage: ship-hosts.sh BUNDLE HOST [HOST...]" >&2; exit 2; }
if (($# > 1)) && [[ -z "${SHARED_ENV:-}" ]]; then
  echo "deploy: note: without SHARED_ENV each new host makes its own secrets; hosts that" >&2
  echo "deploy: share a database need the same API_KEY_PEPPER and SECRET_KEY (see README)" >&2
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
