#!/bin/sh
# A deterministic builder: it reads the job at /job and writes its proposal to /out/sorter.
# With no counterexample yet it proposes a sorter that goes through a set (duplicates are
# lost); once /job/counterexamples holds one, a sorter that keeps duplicates.
set -e
test -f /job/contract.json
test -f /job/cases/dev/order.json
# The sealed case never disclosed (sealed/pair.json) must not reach the job.
if grep -rq '5,4,9,8' /job; then echo "the job holds a sealed case" >&2; exit 3; fi
if ls /job/counterexamples/*.json >/dev/null 2>&1; then
  echo "repairing from: $(cat /job/counterexamples/*.json | tr -d '\n')" >&2
  flags=-n
else
  flags=-nu
fi
cat > /out/sorter <<SORTER
#!/bin/sh
tr -d '[] \n' | tr ',' '\n' | sort $flags | paste -sd, - | sed 's/^/[/; s/\$/]/'
SORTER
chmod 755 /out/sorter
