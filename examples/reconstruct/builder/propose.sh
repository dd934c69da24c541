#!/bin/sh
# The builder of capability.sorter: a deterministic stand-in for a program (or a model) that
# writes an implementation from a contract. Foundry runs it once per round, in a sandbox
# without network, with the job mounted read-only at /job: the contract (contract.json,
# schemas/), the dev and repair cases, round.json, and counterexamples/N.json from each
# earlier round. Never a sealed case that no rejection has disclosed. It writes its
# proposal to /out/sorter.
set -e
echo "round.json: $(cat /job/round.json)"
echo "contract.json: $(cat /job/contract.json)"
echo "dev cases: $(cat /job/cases/dev/*.json | tr '\n' ' ')"

# With no counterexample, sort the numbers as text: every dev case passes, but "10" sorts
# before "9". A counterexample shows that text order is wrong: compare them as numbers.
order="" how="as text"
for c in /job/counterexamples/*.json; do
  [ -f "$c" ] || continue
  echo "counterexample $c: $(tr -d '\n' < "$c")"
  order="-n" how="as numbers"
done

cat > /out/sorter <<SORTER
#!/bin/sh
# Sorts a JSON array of integers, comparing them $how.
tr -d '[] \n' | tr ',' '\n' | sort $order | paste -sd, - | sed 's/^/[/; s/\$/]/'
SORTER
chmod 755 /out/sorter
echo "proposed: a sorter that compares $how"
