#!/bin/sh
# The builder of capability.counts: a deterministic stand-in for a program (or a model) that
# writes an implementation from a contract. Foundry runs it once per round, in a sandbox
# without network, with the job mounted read-only at /job: the contract, its schemas, the
# dev cases, round.json, and counterexamples/N.json from each rejected round (the failing
# input and the reference's output on it, what the candidate made, and the input shrunk to
# the smallest that still fails). Never the reference, never a sealed case no rejection has
# disclosed. It writes its proposal to /out/counts.
set -e
echo "round.json: $(cat /job/round.json)"
echo "dev cases: $(cat /job/cases/dev/*.json | tr '\n' ' ')"

# Two readings of "count the equal values", each an awk program over one integer a line
# that prints "COUNT VALUE" lines:
#   total: each distinct value once, with how often it occurs anywhere in the input;
#   runs:  each run of equal adjacent values, with its length.
# Every dev case has its equal values side by side, so both pass them.
total='{ if (!($1 in n)) v[++k] = $1; n[$1]++ } END { for (i = 1; i <= k; i++) print n[v[i]], v[i] }'
runs='NR == 1 || $1 != p { if (NR > 1) print c, p; p = $1; c = 0 } { c++ } END { if (NR) print c, p }'

# count PROGRAM: a JSON array of integers on stdin, [[COUNT,VALUE],…] on stdout.
count() {
  tr -d '[] \n' | tr ',' '\n' | awk "$1" |
    awk 'BEGIN { printf "[" } { if (NR > 1) printf ","; printf "[%s,%s]", $1, $2 } END { print "]" }'
}

# field NAME FILE: a string member of a counterexample (its inputs and outputs are JSON
# texts of integers: no quote or escape inside).
field() { sed -n "s/^  \"$1\": \"\(.*\)\",\{0,1\}\$/\1/p" "$2"; }

# The proposal is the first reading that makes every counterexample's expected output from
# its input; with no counterexample yet, the first.
for name in total runs; do
  eval "prog=\$$name"
  fits=yes
  for c in /job/counterexamples/*.json; do
    [ -f "$c" ] || continue
    in=$(field input "$c") want=$(field expected "$c") shrunk=$(field shrunk "$c")
    [ -n "$in" ] && [ -n "$want" ] || continue # a round that made no output to compare
    made=$(echo "$in" | count "$prog")
    echo "counterexample $c: input $in, the reference made $want; reading '$name' makes $made"
    if [ -n "$shrunk" ]; then
      echo "  shrunk to $shrunk (from case $(field original "$c")): reading '$name' makes $(echo "$shrunk" | count "$prog")"
    fi
    [ "$(echo "$made" | tr -d ' ')" = "$(echo "$want" | tr -d ' ')" ] || fits=no
  done
  [ "$fits" = yes ] && break
done
if [ "$fits" != yes ]; then
  echo "no reading makes every counterexample's expected output" >&2
  exit 1
fi

cat > /out/counts <<COUNTS
#!/bin/sh
# capability.counts, reading '$name'.
tr -d '[] \n' | tr ',' '\n' | awk '$prog' |
  awk 'BEGIN { printf "[" } { if (NR > 1) printf ","; printf "[%s,%s]", \$1, \$2 } END { print "]" }'
COUNTS
chmod 755 /out/counts
echo "proposed: reading '$name'"
