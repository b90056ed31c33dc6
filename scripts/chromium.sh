# shellcheck shell=bash
# Sourced by the screenshot scripts (report-screenshot.sh, chat-screenshot.sh): finds headless
# Chromium. Sets `browser` to the command, or says how to install it and exits.
browser=""
for candidate in chromium chromium-browser; do
  if command -v "$candidate" >/dev/null 2>&1; then
    browser=$candidate
    break
  fi
done
if [[ -z $browser ]]; then
  echo "error: chromium is not installed; install Debian's package with: apt-get install -y chromium" >&2
  exit 1
fi
