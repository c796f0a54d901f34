#!/bin/bash
# Install the Debian packages hicache needs to build and test, only those
# that are missing. Safe to run again; needs root (or sudo) only when
# something is missing.
set -euo pipefail

# groff-base and man-db: the manual pages' tests render them (cli_help,
# man_pages) and find the installed ones (install_consumer).
PACKAGES=(gcc make cmake pkg-config python3 liburing-dev libssl-dev libcurl4-openssl-dev libxxhash-dev libcjson-dev
	libcmocka-dev python3-torch python3-numpy python3-pytest python3-hypothesis groff-base man-db)
# The fuzzers (make fuzz): clang and its libFuzzer/sanitizer runtime.
if [ -n "${HC_FUZZ:-}" ]; then
	PACKAGES+=(clang libclang-rt-14-dev)
fi
# The style check (make format-check): clang-format 14, Debian 12's.
if [ -n "${HC_FORMAT:-}" ]; then
	PACKAGES+=(clang-format-14)
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$pkg")
	fi
done

if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: all packages present"
	exit 0
fi

echo "deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
