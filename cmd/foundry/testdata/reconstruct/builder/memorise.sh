#!/bin/sh
# A builder that memorises: its first sorter answers only the inputs it was shown (the dev
# case and the dev suite's generated cases, from the seed builders know) and crashes (exit
# 9) on any other; once /job holds a counterexample, it proposes a real sorter.
set -e
cat /job/cases/dev/generated.jsonl > /out/known
echo '[3,1,2]' >> /out/known
if ls /job/counterexamples/*.json >/dev/null 2>&1; then
  echo "repairing from: $(cat /job/counterexamples/*.json | tr -d '\n')" >&2
  guard=
else
  echo "memorised $(wc -l < /out/known) inputs" >&2
  guard='grep -qxF -- "$line" /known || { echo "never seen" >&2; exit 9; }'
fi
cat > /out/sorter <<SORTER
#!/bin/sh
read -r line
$guard
echo "\$line" | tr -d '[] ' | tr ',' '\n' | sort -n | paste -sd, - | sed 's/^/[/; s/\$/]/'
SORTER
chmod 755 /out/sorter
