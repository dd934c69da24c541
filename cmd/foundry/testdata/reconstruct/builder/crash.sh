#!/bin/sh
# A deterministic builder whose first sorter crashes (exit 9, not a declared error) on any
# input holding a duplicate; the evaluator shrinks the failing dev case to the smallest
# input that still crashes it, and /job/counterexamples/1.json shows it. The builder
# repairs only from the shrunk counterexample ("shrunk": "[0,0]"), printing what it read.
set -e
if grep -q '"shrunk": "\[0,0\]"' /job/counterexamples/*.json 2>/dev/null; then
  echo "repairing from the shrunk counterexample: $(grep -h -e '"shrunk' -e '"original' /job/counterexamples/*.json | tr -d '\n')" >&2
  guard=
else
  guard='if [ -n "$(echo "$in" | sort | uniq -d)" ]; then echo "duplicate" >&2; exit 9; fi'
fi
cat > /out/sorter <<SORTER
#!/bin/sh
in=\$(tr -d '[] \n' | tr ',' '\n')
$guard
echo "\$in" | sort -n | paste -sd, - | sed 's/^/[/; s/\$/]/'
SORTER
chmod 755 /out/sorter
