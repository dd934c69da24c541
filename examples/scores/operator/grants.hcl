# The operator's grants, not the recipe's: what this machine allows products to be delivered
# to. `make example` passes it with -grants; an operator keeps theirs in .foundry/grants.hcl
# (or wherever -grants names), outside the recipes, which cannot widen it.
grant "deliver" {
  to = ["dir:/tmp/foundry-scores-release"]
}
