# A capability with no recipe: only a builder that proposes candidates (builder/propose.sh).
# Its first proposal sorts the numbers as text, which the dev cases do not notice and a
# sealed case does; from that counterexample it proposes a numeric sort, which is admitted.
# step.sort waits for the capability and runs in the same apply.
project "reconstruct" {
  brief    = file("README.md")
  registry = "oci-layout:.foundry/registry" # reuse/ pins the admitted sorter from here
}

seed "busybox" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { for a in ["sh", "cat", "chmod", "ls", "paste", "sed", "sort", "tr"] : "/bin/${a}" => "busybox" }
  }
  env = { PATH = "/bin" }
}

capability "sorter" {
  summary     = "Sort a JSON array of integers ascending, keeping duplicates"
  equivalence = "json"
  interface "cli" {
    entrypoint = ["/bin/sorter"]
    input      = jsonschema("schemas/ints.json")
    output     = jsonschema("schemas/ints.json")
  }
  suite "dev" { cases = "cases/dev/*.json" }
  suite "sealed" { cases = "sealed/*.json" } # evaluator only: never in /job

  reconstruct {
    builder {
      image   = seed.busybox
      mounts  = { "/src" = dir("builder") }
      run     = ["sh", "/src/propose.sh"] # reads /job, writes /out/sorter
      outputs = ["/out/sorter"]
      limits { time = "60s" }
    }
    package {
      base  = seed.busybox
      files = { "/bin/sorter" = "/out/sorter" }
    }
    budget { candidates = 3 }
  }
}

step "sort" {
  image   = seed.busybox
  mounts  = { "/sorter" = capability.sorter }
  run     = ["sh", "-c", "echo '[12, 3, 100, 7, 3]' | /sorter/bin/sorter > /out/sorted.json"]
  outputs = ["/out/sorted.json"]
}
