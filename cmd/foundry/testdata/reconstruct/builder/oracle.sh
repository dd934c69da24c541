#!/bin/sh
# A builder that asks the reference as an oracle. With no answers in /job/oracle it writes
# requests to /out/oracle (a duplicate-holding input, $1 more inputs, and two that are no
# request: not JSON, and for a reference the dossier does not have) and proposes a sorter
# that drops duplicates. Once /job/oracle holds the answers, it prints them and keeps
# duplicates only if the reference's answer to [3,1,3] did.
set -e
if ls /job/oracle/*.jsonl >/dev/null 2>&1; then
  cat /job/oracle/*.jsonl >&2
  if grep -q '"output":"\[1,3,3\]' /job/oracle/round-1.jsonl; then flags=-n; else flags=-nu; fi
else
  busybox mkdir -p /out/oracle/bbsort /out/oracle/nosuch
  echo '[3,1,3]' > /out/oracle/bbsort/dup.json
  echo 'not json' > /out/oracle/bbsort/bad.json
  echo '[1]' > /out/oracle/nosuch/x.json
  i=1
  while [ $i -le "${1:-1}" ]; do echo "[$i, 0]" > /out/oracle/bbsort/q$i.json; i=$((i+1)); done
  flags=-nu
fi
cat > /out/sorter <<SORTER
#!/bin/sh
tr -d '[] \n' | tr ',' '\n' | sort $flags | paste -sd, - | sed 's/^/[/; s/\$/]/'
SORTER
chmod 755 /out/sorter
