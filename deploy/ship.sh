#!/usr/bin/env bash
# Copy a bundle and the remote script to HOST over ssh and run the install there as root.
#   ship.sh HOST BUNDLE     (SSH_PORT for another port; SSH_OPTS for other ssh/scp options
#                            such as "-i key"; REMOTE_ARGS for remote.sh options;
#                            SHARED_ENV, a local env file, seeds the host's env file when
#                            it is first created: remote.sh --env-defaults)
set -euo pipefail
host=${1:?usage: ship.sh user@host BUNDLE}
bundle=${2:?usage: ship.sh user@host BUNDLE}
opts=${SSH_OPTS:-}
ssh_port=()
scp_port=()
if [[ -n "${SSH_PORT:-}" ]]; then
  ssh_port=(-p "$SSH_PORT")
  scp_port=(-P "$SSH_PORT")   # scp spells it -P
fi
remote_dir="/tmp/probboard-deploy-$$"
# shellcheck disable=SC2086 # SSH_OPTS is a list of options
ssh "${ssh_port[@]}" $opts "$host" "mkdir -p $remote_dir"
# shellcheck disable=SC2086
files=("$bundle" "$(dirname "$0")/remote.sh")
remote_args=${REMOTE_ARGS:-}
if [[ -n "${SHARED_ENV:-}" ]]; then
  [[ -f "$SHARED_ENV" ]] || { echo "deploy: SHARED_ENV=$SHARED_ENV is not a file" >&2; exit 2; }
  files+=("$SHARED_ENV")
  remote_args="--env-defaults $remote_dir/$(basename "$SHARED_ENV") $remote_args"
fi
# shellcheck disable=SC2086
scp -q "${scp_port[@]}" $opts "${files[@]}" "$host:$remote_dir/"
sudo_cmd="sudo"
[[ "${host%%@*}" == "root" ]] && sudo_cmd=""
# shellcheck disable=SC2086
ssh "${ssh_port[@]}" $opts "$host" "$sudo_cmd bash $remote_dir/remote.sh install $remote_dir/$(basename "$bundle") $remote_args; status=\$?; rm -rf $remote_dir; exit \$status"
