capability "int-sort" {
  summary     = "Sort a JSON array of integers ascending, keeping duplicates"
  equivalence = "json"
  interface "cli" {
    entrypoint = ["/bin/int-sort"]
    input      = jsonschema("schemas/int-list.json")
    output     = jsonschema("schemas/int-list.json")
    errors     = { invalid_input = 2 }
  }
  suite "dev" { cases = "cases/dev/*.json" }
  suite "sealed" { cases = "cases/sealed/*.json" }
}

recipe "int-sort-cheap" {
  provides = capability.int-sort
  cost     = 5
  step "build" {
    image   = seed.base
    mounts  = { "/src" = dir("src") }
    run     = ["sh", "-c", "cp /src/sort.sh /out/int-sort"]
    outputs = ["/out/int-sort"]
  }
  package {
    base  = seed.base
    files = { "/bin/int-sort" = step.build.output["/out/int-sort"] }
  }
}

recipe "int-sort-good" {
  provides = capability.int-sort
  cost     = 10
  step "build" {
    image   = seed.base
    mounts  = { "/src" = dir("src") }
    run     = ["sh", "-c", "cp /src/sort.sh /out/int-sort"]
    outputs = ["/out/int-sort"]
  }
  package {
    files = { "/bin/int-sort" = step.build.output["/out/int-sort"] }
  }
}

product "report" {
  summary  = "A sorted report"
  requires = [capability.int-sort]
  step "render" {
    image   = seed.base
    mounts  = { "/tools/sort" = capability.int-sort }
    run     = ["sh", "-c", "echo '[3,1,2]' | /tools/sort/bin/int-sort > /out/report.json"]
    outputs = ["/out/report.json"]
  }
  check "nonempty" {
    image  = seed.base
    mounts = { "/r/report.json" = step.render.output["/out/report.json"] }
    run    = ["sh", "-c", "test -s /r/report.json"]
  }
  deliver {
    to    = "oci-layout:.foundry/deliveries"
    files = { "/report.json" = step.render.output["/out/report.json"] }
  }
}
