# Condition (a) of bench/laboratory, "preinstalled": the tool is already in the image. Copied
# next to main.hcl, this recipe provides capability.counts from the reference image's own
# uniq -c behind the same JSON adapter, so the plan builds the recipe and never reconstructs:
# its candidate is evaluated (dev cases, a generated sealed batch) and admitted as any
# recipe's is, and step.tally runs.
recipe "preinstalled" {
  provides = capability.counts
  step "install" {
    image   = seed.reference
    env     = { ADAPTER = local.uniq_c }
    run     = ["sh", "-c", "printf '#!/bin/sh\\n%s\\n' \"$ADAPTER\" > /out/counts && chmod 755 /out/counts"]
    outputs = ["/out/counts"]
  }
  package {
    base  = seed.reference
    files = { "/bin/counts" = step.install.output["/out/counts"] }
  }
}
