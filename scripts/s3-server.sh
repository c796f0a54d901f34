#!/bin/bash
# A real S3 server for hicache's tests and benchmarks: a single-node Ceph
# cluster (one monitor, one OSD, radosgw) bound to 127.0.0.1 only, with one
# user and one bucket. Everything lives under one state dir; nothing is
# registered with systemd and nothing outside the dir is written.
#
#   scripts/s3-server.sh start [DIR]    install Ceph if missing (Debian, as root),
#                                       start the cluster, create user and bucket,
#                                       write DIR/env (endpoint, bucket, keys)
#   scripts/s3-server.sh stop [DIR]     stop every daemon by PID, remove DIR
#   scripts/s3-server.sh stop-gateway [DIR] / start-gateway [DIR]
#                                       only radosgw (tests of a dead endpoint)
#   scripts/s3-server.sh status [DIR]   exit 0 when the gateway answers
#   scripts/s3-server.sh env [DIR]      print DIR/env (source it to use the server)
#
# DIR defaults to $HC_S3_DIR or /tmp/hicache-s3. The port is $HC_S3_PORT, or
# the first free one from 7480. HC_S3_STORE=memstore (default: data in RAM,
# capped at HC_S3_MEM_BYTES, default 4 GiB) or bluestore (a sparse 20 GiB file
# in DIR). HC_S3_KEEP=1 keeps DIR (logs) after stop.
#
# start exits 77 when a server cannot be had here at all (Ceph is missing and
# cannot be installed: not root, no apt-get); the reason is in DIR/skip and
# on stderr. Tests skip on that, and only on that.
#
# Settings learnt on a single-host Ceph: stop the gateway, then the OSD,
# then the monitor; a zombie counts as exited; CEPH_KEYRING/CEPH_ARGS must be
# unset; a short Paxos interval; mon_data_avail_crit lowered (docs/S3.md).
set -euo pipefail
unset CEPH_KEYRING CEPH_ARGS CEPH_CONF

cmd=${1:-}
DIR=${2:-${HC_S3_DIR:-/tmp/hicache-s3}}
CONF=$DIR/ceph.conf
BUCKET=${HC_S3_BUCKET:-hicache-test}
REGION=us-east-1
PACKAGES=(ceph-mon ceph-osd radosgw ceph-common curl)
BINARIES=(ceph-mon ceph-osd radosgw radosgw-admin ceph ceph-authtool monmaptool curl)

say() { echo "s3-server: $*" >&2; }
die() { say "$*"; exit 1; }

now_ms() { date +%s%3N; }

# ---- processes, by PID only ----

# PID from a pid file, only if that process runs with our ceph.conf.
our_pid() {
	local f=$DIR/run/$1.pid pid
	[ -f "$f" ] || return 1
	pid=$(cat "$f" 2>/dev/null) || return 1
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$CONF" || return 1
	echo "$pid"
}

# Gone, or a zombie waiting for PID 1 to reap it.
exited() {
	[ -d "/proc/$1" ] || return 0
	grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null
}

stop_daemon() {
	local name=$1 pid
	pid=$(our_pid "$name") || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	for _ in $(seq 100); do
		exited "$pid" && return 0
		sleep 0.05
	done
	say "$name (pid $pid) ignored TERM for 5 s; killing it"
	kill -KILL "$pid" 2>/dev/null || true
	for _ in $(seq 40); do
		exited "$pid" && return 0
		sleep 0.05
	done
}

port_free() {
	! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

free_port() {
	local p=$1
	while ! port_free "$p"; do
		p=$((p + 1))
		[ "$p" -lt $(($1 + 200)) ] || die "no free port in $1..$((p - 1))"
	done
	echo "$p"
}

# ---- install ----

missing_binaries() {
	local b
	for b in "${BINARIES[@]}"; do
		command -v "$b" >/dev/null || echo "$b"
	done
}

cannot_run() {
	echo "$1" >"$DIR/skip"
	say "cannot start an S3 server here: $1"
	exit 77
}

install_ceph() {
	[ -z "$(missing_binaries)" ] && return 0
	local sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		command -v sudo >/dev/null && sudo -n true 2>/dev/null ||
			cannot_run "Ceph is not installed and installing it needs root (apt-get install ${PACKAGES[*]})"
		sudo="sudo -n"
	fi
	command -v apt-get >/dev/null ||
		cannot_run "Ceph is not installed and there is no apt-get to install ${PACKAGES[*]}"
	say "installing ${PACKAGES[*]} (about 65 MB)"
	export DEBIAN_FRONTEND=noninteractive
	if ! $sudo apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >"$DIR/apt.log" 2>&1; then
		$sudo apt-get update -qq >>"$DIR/apt.log" 2>&1 &&
			$sudo apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" \
				>>"$DIR/apt.log" 2>&1 ||
			cannot_run "apt-get could not install ${PACKAGES[*]} (see $DIR/apt.log)"
	fi
	[ -z "$(missing_binaries)" ] || die "installed ${PACKAGES[*]} but still missing: $(missing_binaries)"
}

# ---- start ----

gateway_up() {
	local port
	port=$(cat "$DIR/port" 2>/dev/null) || return 1
	curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$port/"
}

start_gateway() {
	radosgw -c "$CONF" -n client.rgw.a || die "radosgw did not start (see $DIR/log)"
	local t0
	t0=$(now_ms)
	until gateway_up; do
		[ $(($(now_ms) - t0)) -lt 60000 ] || die "radosgw does not answer after 60 s (see $DIR/log/client.rgw.a.log)"
		sleep 0.1
	done
}

write_conf() {
	local fsid=$1 mon_port=$2 port=$3 store=$4
	cat >"$CONF" <<EOF
[global]
fsid = $fsid
mon host = [v2:127.0.0.1:$mon_port]
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind ipv6 = false
auth cluster required = cephx
auth service required = cephx
auth client required = cephx
run dir = $DIR/run
pid file = $DIR/run/\$name.pid
admin socket = $DIR/run/\$name.asok
log file = $DIR/log/\$name.log
crash dir = $DIR/crash
osd pool default size = 1
osd pool default min size = 1
mon allow pool size one = true
mon warn on pool no redundancy = false
osd crush chooseleaf type = 0
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
paxos propose interval = 0.05
mon data avail crit = 1
mon data avail warn = 2
[client.admin]
keyring = $DIR/admin.keyring
[mon.a]
mon data = $DIR/mon
[osd]
osd data = $DIR/osd.\$id
keyring = $DIR/osd.\$id/keyring
osd objectstore = $store
memstore device bytes = ${HC_S3_MEM_BYTES:-4294967296}
bluestore block path = $DIR/osd.\$id/block
bluestore block create = true
bluestore block size = 21474836480
osd max object size = 134217728
[client.rgw.a]
keyring = $DIR/rgw.keyring
rgw data = $DIR/rgw
rgw frontends = beast endpoint=127.0.0.1:$port
rgw enable usage log = false
EOF
}

start() {
	if [ -d "$DIR" ] && [ ! -e "$DIR/.hicache-s3" ] && [ -n "$(ls -A "$DIR")" ]; then
		die "$DIR exists and is not a server dir of this script: choose another (HC_S3_DIR)"
	fi
	mkdir -p "$DIR"
	touch "$DIR/.hicache-s3"
	rm -f "$DIR/skip"
	install_ceph
	if gateway_up && [ -f "$DIR/env" ]; then
		say "already running ($(cat "$DIR/port"))"
		return 0
	fi
	stop_all quiet
	remove_dir
	mkdir -p "$DIR"/{run,log,crash,mon,rgw}
	touch "$DIR/.hicache-s3"
	chmod 700 "$DIR"
	local t0 port mon_port fsid store osd_uuid osd_secret osd_id access secret
	t0=$(now_ms)
	port=${HC_S3_PORT:-$(free_port 7480)}
	port_free "$port" || die "port $port is taken"
	mon_port=$(free_port 13300)
	fsid=$(cat /proc/sys/kernel/random/uuid)
	store=${HC_S3_STORE:-memstore}
	case $store in memstore | bluestore) ;; *) die "HC_S3_STORE=$store: memstore or bluestore" ;; esac
	write_conf "$fsid" "$mon_port" "$port" "$store"
	echo "$port" >"$DIR/port"

	ceph-authtool --create-keyring "$DIR/mon.keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
	ceph-authtool --create-keyring "$DIR/admin.keyring" --gen-key -n client.admin \
		--cap mon 'allow *' --cap osd 'allow *' --cap mgr 'allow *' >/dev/null
	ceph-authtool "$DIR/mon.keyring" --import-keyring "$DIR/admin.keyring" >/dev/null
	monmaptool --create --fsid "$fsid" --addv a "[v2:127.0.0.1:$mon_port]" "$DIR/monmap" >/dev/null
	ceph-mon -c "$CONF" --mkfs -i a --monmap "$DIR/monmap" --keyring "$DIR/mon.keyring" \
		>"$DIR/log/mkfs-mon.out" 2>&1 || die "ceph-mon --mkfs failed (see $DIR/log)"
	ceph-mon -c "$CONF" -i a || die "ceph-mon did not start (see $DIR/log)"

	osd_uuid=$(cat /proc/sys/kernel/random/uuid)
	osd_secret=$(ceph-authtool --gen-print-key)
	printf '{"cephx_secret": "%s"}\n' "$osd_secret" >"$DIR/osd.json"
	osd_id=$(ceph -c "$CONF" --connect-timeout 30 osd new "$osd_uuid" -i "$DIR/osd.json" 2>"$DIR/log/osd-new.err") ||
		die "ceph osd new failed: $(tail -1 "$DIR/log/osd-new.err")"
	rm -f "$DIR/osd.json"
	mkdir -p "$DIR/osd.$osd_id"
	ceph-osd -c "$CONF" -i "$osd_id" --mkfs --key "$osd_secret" --osd-uuid "$osd_uuid" \
		>"$DIR/log/mkfs-osd.out" 2>&1 || die "ceph-osd --mkfs failed (see $DIR/log)"
	ceph-authtool --create-keyring "$DIR/osd.$osd_id/keyring" --name "osd.$osd_id" \
		--add-key "$osd_secret" >/dev/null
	ceph-osd -c "$CONF" -i "$osd_id" 2>"$DIR/log/osd-start.err" || die "ceph-osd did not start (see $DIR/log)"
	echo "osd.$osd_id" >"$DIR/osd-name"

	ceph -c "$CONF" auth get-or-create client.rgw.a mon 'allow rw' osd 'allow rwx' \
		-o "$DIR/rgw.keyring" 2>/dev/null || die "cannot create the gateway's key"
	start_gateway

	access=HC$(head -c 9 /dev/urandom | od -An -tx1 | tr -d ' \n' | tr a-f A-F)
	secret=$(head -c 30 /dev/urandom | base64 | tr -d '/+=\n')
	radosgw-admin -c "$CONF" user create --uid=hicache --display-name=hicache \
		--access-key="$access" --secret-key="$secret" >/dev/null 2>"$DIR/log/user.err" ||
		die "radosgw-admin user create failed: $(tail -1 "$DIR/log/user.err")"
	# The bucket: one signed PUT (the empty payload's SHA-256).
	local code
	code=$(curl -s -o "$DIR/log/bucket.out" -w '%{http_code}' -X PUT \
		--aws-sigv4 "aws:amz:$REGION:s3" --user "$access:$secret" \
		-H 'x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' \
		"http://127.0.0.1:$port/$BUCKET") || true
	[ "$code" = 200 ] || die "creating bucket $BUCKET: HTTP $code ($(cat "$DIR/log/bucket.out" 2>/dev/null))"

	umask 077
	cat >"$DIR/env" <<EOF
export HICACHE_S3_ENDPOINT=http://127.0.0.1:$port
export HICACHE_S3_REGION=$REGION
export AWS_DEFAULT_BUCKET=$BUCKET
export AWS_ACCESS_KEY_ID=$access
export AWS_SECRET_ACCESS_KEY=$secret
EOF
	say "up on http://127.0.0.1:$port, bucket $BUCKET, $store, in $(($(now_ms) - t0)) ms (keys in $DIR/env)"
}

# Only a dir this script made (it holds the marker) is ever removed.
remove_dir() {
	[ -e "$DIR/.hicache-s3" ] && rm -rf "$DIR"
	return 0
}

stop_all() {
	local t0
	t0=$(now_ms)
	[ -d "$DIR/run" ] || return 0
	stop_daemon client.rgw.a
	[ -f "$DIR/osd-name" ] && stop_daemon "$(cat "$DIR/osd-name")"
	stop_daemon mon.a
	[ "${1:-}" = quiet ] || say "stopped in $(($(now_ms) - t0)) ms"
}

case $cmd in
start) start ;;
stop)
	stop_all
	[ "${HC_S3_KEEP:-0}" = 1 ] || remove_dir
	;;
stop-gateway) stop_daemon client.rgw.a ;;
start-gateway)
	[ -f "$CONF" ] || die "no server in $DIR (start it first)"
	our_pid client.rgw.a >/dev/null || start_gateway
	;;
status) gateway_up ;;
env)
	[ -f "$DIR/env" ] || die "no server in $DIR (start it first)"
	cat "$DIR/env"
	;;
*)
	sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac
