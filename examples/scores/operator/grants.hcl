# The operator's grants, not the recipe's: what this machine allows products to be delivered
# to. `make example` passes it with -grants; an operator keeps theirs outside any project
# (~/.config/foundry/grants.hcl, or the file $FOUNDRY_GRANTS names); this one is inside the
# example, so foundry warns that it reads it only because -grants names it. Outside the
# recipes, which cannot widen it.
grant "deliver" {
  to = ["dir:/tmp/foundry-scores-release"]
}
