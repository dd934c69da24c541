# A capability reconstructed from a reference the machine already has: busybox's `uniq -c`
# (the host's static /bin/busybox), observed only in a sandbox of its own. No recipe
# provides capability.counts; its builder (builder/propose.sh, a deterministic program)
# first counts equal values over the whole input, which the dev cases do not notice and a
# generated sealed batch, checked against the reference, does. From the shrunk
# counterexample it proposes counting runs of adjacent values, admitted on a fresh sealed
# batch. step.tally waits for the capability and runs in the same apply.
#
# bench/laboratory applies this project under three conditions (conditions/README.md).
project "laboratory" {
  brief    = file("README.md")
  registry = "oci-layout:.foundry/registry"
}

locals {
  # The reference's JSON adapter: a JSON array of integers on stdin, one a line to uniq -c,
  # whose "  COUNT VALUE" lines become [[COUNT,VALUE],…].
  uniq_c = "tr -d '[] \\n' | tr ',' '\\n' | uniq -c | awk 'BEGIN { printf \"[\" } { if (NR > 1) printf \",\"; printf \"[%s,%s]\", $1, $2 } END { print \"]\" }'"
}

# What builders and candidates run on: a shell and a few text tools, no uniq.
seed "busybox" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { for a in ["sh", "awk", "cat", "chmod", "ls", "sed", "tr"] : "/bin/${a}" => "busybox" }
  }
  env = { PATH = "/bin" }
}

# The reference's image: the same busybox, with uniq.
seed "reference" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { for a in ["sh", "awk", "chmod", "printf", "tr", "uniq"] : "/bin/${a}" => "busybox" }
  }
  env = { PATH = "/bin" }
}

capability "counts" {
  summary     = "Count the runs of equal adjacent integers of a JSON array, as uniq -c does: [[count, value], …]"
  equivalence = "json"
  interface "cli" {
    entrypoint = ["/bin/counts"]
    input      = jsonschema("schemas/ints.json")
    output     = jsonschema("schemas/counts.json")
  }
  suite "dev" { cases = "cases/dev/*.json" }
  # A fresh secret seed per candidate; the expected outputs are the reference's. About a
  # quarter of generated inputs repeat a value apart from itself (24% of 100,000 inputs of
  # engine/generate for schemas/ints.json): a batch of 40, some 30 once repeated inputs
  # are dropped, misses that about once in 2,000 to 4,000.
  suite "sealed" {
    generate {
      count  = 40
      expect = reference.uniq
    }
  }

  reconstruct {
    reference "uniq" {
      image      = seed.reference
      entrypoint = ["sh", "-c", local.uniq_c]
      licence    = "GPL-2.0-only"
      origin     = "busybox uniq -c, the host's static /bin/busybox"
      observe    = true  # its outputs are the sealed batch's expected outputs
      distribute = false # a candidate may not hold its bytes
    }
    builder {
      image   = seed.busybox
      mounts  = { "/src" = dir("builder") }
      run     = ["sh", "/src/propose.sh"] # reads /job, writes /out/counts
      outputs = ["/out/counts"]
      limits { time = "60s" }
    }
    package {
      base  = seed.busybox
      files = { "/bin/counts" = "/out/counts" }
    }
    budget {
      candidates = 3
      probes     = 30 # round 1: 3 dev runs and up to 24 shrinking; round 2: 3 dev runs
    }
  }
}

step "tally" {
  image   = seed.busybox
  mounts  = { "/counts" = capability.counts }
  run     = ["sh", "-c", "echo '[3, 3, 3, -1, 3, 3, 0, 0]' | /counts/bin/counts > /out/tally.json"]
  outputs = ["/out/tally.json"]
}
