# tools/chromium.sh: sourced by tools/page_check.sh and tools/web_check.sh: sets $browser to
# Debian's chromium (or $CHROMIUM), installing the package with apt-get when it is missing
# and this is root; otherwise says "skipped: WHAT (chromium not available ...)" and exits 0.
# Usage: WHAT="page check"; . tools/chromium.sh
browser=${CHROMIUM:-}
[ -n "$browser" ] || browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
        echo "== apt-get install chromium =="
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
              --no-install-recommends chromium >/dev/null; } || echo "apt-get failed"
        browser=$(command -v chromium || true)
    fi
    if [ -z "$browser" ]; then
        echo "skipped: $WHAT (chromium not available: install Debian's chromium package)"
        exit 0
    fi
fi

# chromium_home DIR: Chromium writes its crash reports' settings and dconf's cache under
# $HOME whatever its --user-data-dir; a home of its own inside DIR (the caller's work
# folder, removed on exit) leaves the user's untouched.
chromium_home() {
    export HOME="$1/home" XDG_CONFIG_HOME="$1/home/.config" XDG_CACHE_HOME="$1/home/.cache"
    mkdir -p "$HOME"
}
