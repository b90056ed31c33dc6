#!/usr/bin/env bash
# Screenshot of an HTML report (e.g. `hearth calibrate --report DIR`) with headless Chromium, so
# a person or a review can look at the charts without a desktop:
#   scripts/report-screenshot.sh REPORT_DIR OUT.png [WIDTH,HEIGHT]
# Needs Debian's `chromium` package (apt-get install -y chromium); the page loads nothing from the
# network, so none is needed.
set -euo pipefail

usage() {
  echo "usage: $0 REPORT_DIR OUT.png [WIDTH,HEIGHT]  (default size 1400,2400)" >&2
  exit 2
}
[[ $# -eq 2 || $# -eq 3 ]] || usage
report_dir=$1
out=$2
size=${3:-1400,2400}
[[ $size =~ ^[0-9]+,[0-9]+$ ]] || usage

page=$(realpath -m -- "$report_dir")/index.html
if [[ ! -f $page ]]; then
  echo "error: $page does not exist (is $report_dir a report directory?)" >&2
  exit 1
fi

# shellcheck source=scripts/chromium.sh
source "$(dirname -- "$0")/chromium.sh"

out_dir=$(dirname -- "$out")
mkdir -p -- "$out_dir"
out_abs=$(realpath -- "$out_dir")/$(basename -- "$out")
rm -f -- "$out_abs"

# A throwaway profile keeps runs independent of each other and of any user profile; Chromium's
# chatter on stderr (dbus, GPU) is kept and shown only when no screenshot came out.
profile=$(mktemp -d)
log=$(mktemp)
trap 'rm -rf -- "$profile" "$log"' EXIT
if ! timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
    --user-data-dir="$profile" --no-first-run --window-size="$size" \
    --screenshot="$out_abs" "file://$page" >"$log" 2>&1 || [[ ! -s $out_abs ]]; then
  cat "$log" >&2
  echo "error: $browser did not write $out_abs" >&2
  exit 1
fi
echo "$out_abs"
