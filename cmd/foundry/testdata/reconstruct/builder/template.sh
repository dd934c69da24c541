#!/bin/sh
# A deterministic builder that proposes source, not the tool: a template (/out/sorter.in)
# and the sort flags to fill it with (/out/flags); the reconstruct block's build turns
# them into /out/sorter with sed. With no counterexample yet the flags drop duplicates;
# once /job/counterexamples holds one, they keep them.
set -e
test -f /job/contract.json
if ls /job/counterexamples/*.json >/dev/null 2>&1; then
  echo "repairing from: $(cat /job/counterexamples/*.json | tr -d '\n')" >&2
  printf '%s\n' -n > /out/flags
else
  printf '%s\n' -nu > /out/flags
fi
cat > /out/sorter.in <<'SRC'
#!/bin/sh
tr -d '[] \n' | tr ',' '\n' | sort @FLAGS@ | paste -sd, - | sed 's/^/[/; s/$/]/'
SRC
echo "proposed a template with flags $(cat /out/flags)" >&2
