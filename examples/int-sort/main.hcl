# A capability with two recipes. The cheap one is subtly wrong (it drops duplicates); the
# sealed cases, which no builder sees, catch it, and the correct one is admitted.
project "int-sort" {
  brief    = file("README.md")
  registry = "oci-layout:.foundry/registry"
}

capability "int-sort" {
  summary     = "Sort a JSON array of 64-bit integers ascending, keeping duplicates"
  equivalence = "json"
  interface "cli" {
    entrypoint = ["/bin/int-sort"]
    input      = jsonschema("schemas/int-list.json")
    output     = jsonschema("schemas/int-list.json")
    errors     = { invalid_input = 2 }
  }
  suite "dev" { cases = "cases/dev/*.json" }
  suite "repair" { cases = "cases/repair/*.json" }
  suite "sealed" { cases = "sealed/*.json" } # evaluator only: no step may read sealed/
}

# The host's Go toolchain, hashed into a seed; builds run offline in the sandbox.
seed "go" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { "/bin/sh" = "busybox" }
  }
  layer {
    dir = host_dir("/usr/local/go")
    at  = "/usr/local/go"
  }
  env = {
    PATH        = "/usr/local/go/bin:/bin"
    HOME        = "/tmp"
    GOCACHE     = "/tmp/go-cache"
    GOPATH      = "/tmp/go"
    GOTOOLCHAIN = "local"
    GOFLAGS     = "-mod=mod"
    CGO_ENABLED = "0"
  }
}

# The base of the packaged capability: just a shell for debugging.
seed "base" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { "/bin/sh" = "busybox" }
  }
}

recipe "int-sort-set" {
  provides = capability.int-sort
  cost     = 5
  step "build" {
    image   = seed.go
    mounts  = { "/src" = dir("src/cheap") }
    workdir = "/src"
    run     = ["go", "build", "-trimpath", "-o", "/out/int-sort", "."]
    outputs = ["/out/int-sort"]
    limits {
      memory = "2GiB"
      time   = "10m"
    }
  }
  package {
    base  = seed.base
    files = { "/bin/int-sort" = step.build.output["/out/int-sort"] }
  }
}

recipe "int-sort-go" {
  provides = capability.int-sort
  cost     = 10
  step "build" {
    image   = seed.go
    mounts  = { "/src" = dir("src/good") }
    workdir = "/src"
    run     = ["go", "build", "-trimpath", "-o", "/out/int-sort", "."]
    outputs = ["/out/int-sort"]
    limits {
      memory = "2GiB"
      time   = "10m"
    }
  }
  package {
    base  = seed.base
    files = { "/bin/int-sort" = step.build.output["/out/int-sort"] }
  }
}
