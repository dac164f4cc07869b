#!/usr/bin/env bash
# Installs the MetaRoCE dissector (metaroce.lua) where Wireshark and tshark
# load Lua plugins at start, and a copy beside the daemon's docs. Called by
# `make install` (the install-wireshark target).
#
# The plugin directory is, first found:
#   - $WIRESHARK_PLUGIN_DIR, if set;
#   - the "Global Lua Plugins" folder the installed tshark reports
#     (tshark -G folders; /usr/lib/x86_64-linux-gnu/wireshark/plugins on
#     Debian and Ubuntu amd64);
#   - none: without tshark only the copy is installed, and the script says
#     how to load it (wireshark -X lua_script:FILE, or copy it to
#     ~/.local/lib/wireshark/plugins/).
# DESTDIR stages the install for packaging; DATADIR defaults to
# /usr/local/share.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
src="$here/metaroce.lua"
DESTDIR=${DESTDIR:-}
DATADIR=${DATADIR:-/usr/local/share}

copy="$DESTDIR$DATADIR/metaroced/wireshark"
install -d "$copy"
install -m 0644 "$src" "$copy/metaroce.lua"

dir=${WIRESHARK_PLUGIN_DIR:-}
if [ -z "$dir" ] && command -v tshark >/dev/null 2>&1; then
	dir=$(tshark -G folders 2>/dev/null | sed -n 's/^Global Lua Plugins:[[:space:]]*//p' | head -n 1)
fi
if [ -z "$dir" ]; then
	echo "install-wireshark: tshark not found; the dissector is in $DATADIR/metaroced/wireshark/metaroce.lua:"
	echo "install-wireshark: load it with 'wireshark -X lua_script:$DATADIR/metaroced/wireshark/metaroce.lua'"
	echo "install-wireshark: or copy it to ~/.local/lib/wireshark/plugins/ (docs/operate.md)"
	exit 0
fi
install -d "$DESTDIR$dir"
install -m 0644 "$src" "$DESTDIR$dir/metaroce.lua"
echo "install-wireshark: $dir/metaroce.lua (Wireshark and tshark load it at start)"
