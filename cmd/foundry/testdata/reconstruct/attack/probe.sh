#!/bin/sh
# An attacking builder. Before it proposes (with propose.sh) it looks everywhere it can for
# what a builder must never get: sealed cases, signing keys, the registry, the state
# database, the network. Each attempt is one line on stderr:
#
#   OBSERVED <what>: <result>
#
# It knows nothing of the project: it looks for things by their shape (a case file, a PEM
# private key, an OCI layout, an SQLite database), prints the SHA-256 of every file it can
# read so that the test can compare them with the project's secrets, and tries to connect to
# the addresses in $PROBE_TARGETS (a listener the test runs on the host) and to the
# internet. The test decides what is a leak (reconstruct_attack_test.go).
#
# The patterns it searches for are assembled at run time, so that this file, which the
# builder can see at /attack, does not match them itself.
say() { echo "OBSERVED $*" >&2; }
q='"'
pem="PRIVATE"
sqlite="SQLite format"
layout="imageLayout"

# Every regular file outside the kernel filesystems (bind mounts included: no -xdev).
files=$(find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o -type f -print 2>/dev/null)
cases=none keys=none registry=none db=none unreadable=none
for f in $files; do
	if sum=$(sha256sum "$f" 2>/dev/null); then
		say "file: ${sum%% *} $f"
	else
		unreadable="$f"
		say "unreadable: $f"
		continue
	fi
	if grep -q "${q}input${q}" "$f" && grep -q "${q}output${q}" "$f"; then
		cases=found
		say "case-like: $f $(tr -d '\n' <"$f")"
	fi
	case "$f" in /job/counterexamples/*) say "counterexample: $f $(tr -d '\n' <"$f")" ;; esac
	if grep -q -- "-----BEGIN $pem KEY-----\|-----BEGIN EC $pem KEY-----\|-----BEGIN RSA $pem KEY-----" "$f"; then
		keys=found
		say "private-key: $f"
	fi
	case "$f" in *.key | *.pem) keys=found; say "private-key: $f (by name)" ;; esac
	if grep -q "${layout}Version" "$f" || [ "${f##*/}" = oci-layout ]; then
		registry=found
		say "registry: $f"
	fi
	if [ "$(head -c 13 "$f")" = "$sqlite" ]; then
		db=found
		say "state-db: $f"
	fi
	case "$f" in *.db | *.db-wal | *.db-shm | */state.db*) db=found; say "state-db: $f (by name)" ;; esac
done
[ "$cases" = found ] || say "case-like: none"
[ "$keys" = found ] || say "private-key: none"
[ "$registry" = found ] || say "registry: none"
[ "$db" = found ] || say "state-db: none"
[ "$unreadable" != none ] || say "unreadable: none"
for d in $(find / \( -path /proc -o -path /sys -o -path /dev \) -prune -o -type d -name blobs -print 2>/dev/null); do
	say "registry: $d (a blobs directory)"
done
socks=$(find / \( -path /proc -o -path /sys \) -prune -o -type s -print 2>/dev/null)
say "sockets: ${socks:-none}"

# What the process is given: its environment, and what is mounted where.
env | while IFS= read -r kv; do say "env: $kv"; done
while read -r _ _ _ root mnt opts rest; do
	say "mount: $mnt from $root ($opts; ${rest#* - })"
done </proc/self/mountinfo

# The network: the interfaces, a control on the sandbox's own loopback (which must work,
# or the refusals below would prove nothing), the host listener and the internet.
say "network interfaces: $(ls /sys/class/net | tr '\n' ' ')"
# The listener exits once its one peer hangs up; timeout bounds it if none ever comes. Under
# load either nc may start late, so the client retries for 10s and the listener is waited for;
# an exchange that still carried nothing (CI once saw the listener write nothing) is tried
# again, up to three times, before the control is reported as failed.
reply=
for exchange in 1 2 3; do
	timeout 20 nc -l -p 7001 >/tmp/loopback &
	listener=$!
	tries=0
	until echo loopback-ok | nc -w 2 127.0.0.1 7001 2>/dev/null; do
		tries=$((tries + 1))
		[ $tries -ge 50 ] && break
		sleep 0.2
	done
	wait $listener
	reply=$(cat /tmp/loopback)
	[ -n "$reply" ] && break
done
say "network loopback: ${reply:-nothing}"
for t in $PROBE_TARGETS 1.1.1.1:80; do
	if reply=$(echo probe | nc -w 3 "${t%:*}" "${t##*:}" 2>&1); then
		say "network nc $t: connected: $reply"
	else
		say "network nc $t: refused: $reply"
	fi
	# wget fails on the listener's answer, which is not HTTP: what it says tells. (busybox
	# wget's own -T crashes; timeout bounds it instead.)
	reply=$(timeout 5 wget -q -O - "http://$t/" 2>&1)
	case "$reply" in
	*"can't connect"*) say "network wget $t: refused: $reply" ;;
	"") say "network wget $t: refused: no answer in 5s" ;;
	*) say "network wget $t: connected: $(echo "$reply" | head -c 80)" ;;
	esac
done

exec sh /src/propose.sh
