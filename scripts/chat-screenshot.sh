#!/usr/bin/env bash
# Screenshot of hearth serve's chat page answering a question, with headless Chromium, so that a
# person or a review can see the page work without a desktop:
#   scripts/chat-screenshot.sh [--dom DOM.html] MODEL OUT.png [SERVE_FLAGS...]
# Starts `hearth serve -m MODEL --port 0 SERVE_FLAGS` on a free loopback port, waits for /health,
# loads http://127.0.0.1:PORT/?q=Once%20upon%20a%20time (the page sends the question once and
# streams the reply into its message list), writes the screenshot and stops the server. With
# --dom it also writes the page's DOM after a second load (a second reply), for tests to read.
# Environment: HEARTH (the binary; default build/tools/hearth, else `hearth` on PATH), CHAT_QUERY
# (the page's query string, URL-encoded; default q=Once%20upon%20a%20time; the page also reads
# max_tokens and temperature there), CHAT_BUDGET_MS (Chromium's virtual time budget, default
# 20000).
# Needs Debian's `chromium` package (apt-get install -y chromium); nothing comes from the network.
set -euo pipefail

usage() {
  echo "usage: $0 [--dom DOM.html] MODEL OUT.png [SERVE_FLAGS...]" >&2
  exit 2
}
dom=""
if [[ ${1:-} == --dom ]]; then
  [[ $# -ge 2 ]] || usage
  dom=$2
  shift 2
fi
[[ $# -ge 2 ]] || usage
model=$1
out=$2
shift 2
query=${CHAT_QUERY:-q=Once%20upon%20a%20time}
budget=${CHAT_BUDGET_MS:-20000}
[[ $budget =~ ^[0-9]+$ ]] || usage

root=$(cd "$(dirname "$0")/.." && pwd)
hearth=${HEARTH:-$root/build/tools/hearth}
if [[ ! -x $hearth ]]; then
  hearth=$(command -v hearth || true)
  [[ -n $hearth ]] || { echo "error: no hearth binary (build it, or set HEARTH=...)" >&2; exit 1; }
fi
# shellcheck source=scripts/chromium.sh
source "$root/scripts/chromium.sh"
[[ -f $model ]] || { echo "error: $model does not exist" >&2; exit 1; }

absolute() { echo "$(realpath -- "$(dirname -- "$1")")/$(basename -- "$1")"; }
mkdir -p -- "$(dirname -- "$out")"
out=$(absolute "$out")
rm -f -- "$out"
if [[ -n $dom ]]; then
  mkdir -p -- "$(dirname -- "$dom")"
  dom=$(absolute "$dom")
  rm -f -- "$dom"
fi

work=$(mktemp -d)
server_pid=""
cleanup() {
  if [[ -n $server_pid ]]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf -- "$work"
}
trap cleanup EXIT

fail() {
  echo "error: $1" >&2
  for log in "$work"/*.log; do
    [[ -f $log ]] && { echo "--- $(basename "$log")" >&2; tail -n 30 "$log" >&2; }
  done
  exit 1
}

"$hearth" serve -m "$model" --host 127.0.0.1 --port 0 "$@" 2>"$work/server.log" &
server_pid=$!

# The server prints its port when listening, then answers /health with 200 once the model is in.
port=""
for _ in $(seq 600); do
  port=$(sed -n 's|.*listening on http://[^ ]*:\([0-9][0-9]*\) .*|\1|p' "$work/server.log" |
    head -n 1)
  [[ -n $port ]] && break
  kill -0 "$server_pid" 2>/dev/null || fail "hearth serve exited"
  sleep 0.1
done
[[ -n $port ]] || fail "hearth serve did not say which port it listens on"
# A subshell: a refused connection ends it, not the script. Bash's /dev/tcp needs no curl.
health() (
  exec 3<>"/dev/tcp/127.0.0.1/$port"
  printf 'GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
  read -r _ status _ <&3
  [[ $status == 200 ]]
)
ready=""
for _ in $(seq 600); do
  if health 2>/dev/null; then
    ready=1
    break
  fi
  kill -0 "$server_pid" 2>/dev/null || fail "hearth serve exited"
  sleep 0.1
done
[[ -n $ready ]] || fail "hearth serve did not become ready"

# Virtual time stands still while the reply streams (a network fetch is pending), so the capture
# comes after the whole reply; the budget covers the page's own timers. The page's clock is that
# virtual time too, so the tokens/s under the reply means nothing in the picture. A throwaway
# profile keeps runs independent; Chromium's chatter (dbus, GPU) is shown only when it fails.
url="http://127.0.0.1:$port/?$query"
chrome() {
  timeout 180 "$browser" --headless --disable-gpu --no-sandbox --hide-scrollbars --no-first-run \
    --user-data-dir="$work/profile" --window-size=1000,800 --virtual-time-budget="$budget" "$@"
}
if ! chrome --screenshot="$out" "$url" >"$work/chromium.log" 2>&1 || [[ ! -s $out ]]; then
  fail "$browser did not write $out"
fi
if [[ -n $dom ]]; then
  if ! chrome --dump-dom "$url" >"$dom" 2>"$work/chromium-dom.log" || [[ ! -s $dom ]]; then
    fail "$browser did not dump the page's DOM"
  fi
fi
echo "$out"
[[ -z $dom ]] || echo "$dom"
