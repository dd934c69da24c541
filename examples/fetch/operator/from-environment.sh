#!/bin/sh
# The operator's side of examples/fetch, made from their environment into DIR (the project's
# .foundry/operator by `make example`), never into the project's files:
#   DIR/grants.hcl  grant "network" for the module proxy go env GOPROXY names (its first URL)
#   DIR/proxy.vars  goproxy and goproxy_host, the project's variables, as a -var-file
set -eu
dir=${1:?usage: from-environment.sh DIR}
proxy=$(go env GOPROXY | cut -d, -f1 | cut -d'|' -f1)
case $proxy in
http://*) port=80 ;;
https://*) port=443 ;;
*)
	echo "go env GOPROXY is '$proxy': examples/fetch needs a module proxy URL" >&2
	exit 1
	;;
esac
hostport=${proxy#*://}
hostport=${hostport%%/*}
hostport=${hostport##*@}
case $hostport in
*\]:* | [!\[]*:*) ;; # a port is named
*) hostport=$hostport:$port ;;
esac
mkdir -p "$dir"
printf 'grant "network" {\n  hosts = ["%s"]\n}\n' "$hostport" >"$dir/grants.hcl"
printf 'goproxy      = "%s"\ngoproxy_host = "%s"\n' "$proxy" "$hostport" >"$dir/proxy.vars"
