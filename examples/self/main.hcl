# Foundry builds Foundry: the foundry binary from this repository's own files, its Go modules
# fetched through the egress broker by a fixed-output step pinned by digest, built offline,
# reproducibly (apply -rebuild checks it), unit-tested and smoke-run as checks.
project "self" {
  brief = file("README.md")
}

# The repository is the operator's checkout, not a file of this project: `make example`
# passes its absolute path (-var repo=$(CURDIR)). Its directories enter the image below as
# host_dir layers, each hashed and listed in the plan with its digest.
variable "repo" {
  type        = string
  description = "absolute path of the Foundry repository to build (the checkout holding go.mod)"
}

# The module proxy is the operator's, read from their environment (go env GOPROXY) by
# ../fetch/operator/from-environment.sh; nothing in the project names it.
variable "goproxy" {
  type        = string
  description = "the module proxy's URL, as go env GOPROXY names it"
}
variable "goproxy_host" {
  type        = string
  description = "HOST:PORT of goproxy, which a grant \"network\" of the operator allows"
}

# A seed's environment is its own (layer.from takes another seed's files, not its env).
locals {
  go_env = {
    PATH        = "/usr/local/go/bin:/bin"
    HOME        = "/tmp"
    GOCACHE     = "/tmp/go-cache"
    GOPATH      = "/tmp/go"
    GOTOOLCHAIN = "local"
    GOFLAGS     = "-modcacherw"
    CGO_ENABLED = "0"
  }
}

# The host's Go toolchain, hashed into a seed, and the CA certificates the fetch needs (the
# proxy is reached over TLS, through the broker's CONNECT tunnel).
seed "go" {
  layer {
    files = {
      "/bin/busybox"                       = host_file("/bin/busybox")
      "/etc/ssl/certs/ca-certificates.crt" = host_file("/etc/ssl/certs/ca-certificates.crt")
    }
    symlinks = { "/bin/sh" = "busybox", "/bin/cp" = "busybox", "/bin/mkdir" = "busybox", "/bin/rm" = "busybox", "/bin/find" = "busybox", "/bin/sha256sum" = "busybox", "/bin/grep" = "busybox" }
  }
  layer {
    dir = host_dir("/usr/local/go")
    at  = "/usr/local/go"
  }
  env = local.go_env
}

# go.mod and go.sum alone: what the module fetch depends on. An edit of any .go file leaves
# step.modules cached (and the network unused).
seed "modfiles" {
  layer { from = seed.go }
  layer {
    files = {
      "/src/go.mod" = host_file("${var.repo}/go.mod")
      "/src/go.sum" = host_file("${var.repo}/go.sum")
    }
  }
  env     = local.go_env
  workdir = "/src"
}

# The pin of product.foundry.step.modules, and the go.mod and go.sum (their SHA-256) it was made
# from. When either changes, the step fails before it uses the network, and cmd/foundry's
# TestExampleSelf fails: `make example-self-pin` (which needs the module proxy) runs the step
# and writes all three here.
locals {
  modules_pin = {
    go_mod        = "685d4a4788278fd1a2d5693a6cb0611baa6edc8e1516d3b99572471229db70e4"
    go_sum        = "2bc57a2df777537d1365dfd21768488febab88f4faf8316eeddc74bf3a890f99"
    output_digest = "sha256:240d806645a6ea6e148e78fcb6e3a26ba8ea7fce317b7c0822a7ffd7cd0d277d"
  }
}

# The module's source: the directories of its Go packages (those of go list -deps
# ./cmd/foundry, which the checks' packages are among), not .git, examples (each with its own
# .foundry), bench, devtemporal (its own module), docs, scripts or spec. A new top-level
# package directory must be added here: cmd/foundry's TestExampleSelf checks the list.
seed "src" {
  layer { from = seed.modfiles }
  layer {
    dir = host_dir("${var.repo}/cmd")
    at  = "/src/cmd"
  }
  layer {
    dir = host_dir("${var.repo}/digest")
    at  = "/src/digest"
  }
  layer {
    dir = host_dir("${var.repo}/egress")
    at  = "/src/egress"
  }
  layer {
    dir = host_dir("${var.repo}/engine")
    at  = "/src/engine"
  }
  layer {
    dir = host_dir("${var.repo}/executors")
    at  = "/src/executors"
  }
  layer {
    dir = host_dir("${var.repo}/internal")
    at  = "/src/internal"
  }
  layer {
    dir = host_dir("${var.repo}/lang")
    at  = "/src/lang"
  }
  layer {
    dir = host_dir("${var.repo}/provenance")
    at  = "/src/provenance"
  }
  layer {
    dir = host_dir("${var.repo}/registry")
    at  = "/src/registry"
  }
  layer {
    dir = host_dir("${var.repo}/store")
    at  = "/src/store"
  }
  env     = local.go_env
  workdir = "/src"
}

# The product: the module fetch and the build (a product's steps see only its own), and the
# checks: unit tests of packages that need no root, no containerd and no network, one package
# at a time, and the binary's smoke run on a small project.
product "foundry" {
  summary = "the foundry binary, built from its own repository"

  # The network, only because its result is pinned in advance: `go mod download` of go.sum's
  # modules into /out/mod, a module cache the build then reads offline. go.sum checks each
  # module; output_digest pins the whole tree. When go.mod or go.sum change, this step runs
  # again and fails, naming the digest it got: `make example-self-pin` writes it here
  # (cmd/foundry's TestExampleSelf fails while the pin is not the one go.sum yields).
  step "modules" {
    description   = "the modules go.sum pins, from the module proxy through the broker"
    image         = seed.modfiles
    workdir       = "/src"
    network       = "egress"
    egress        = [var.goproxy_host]
    output_digest = local.modules_pin.output_digest
    env = {
      GOPROXY    = var.goproxy
      GOSUMDB    = "off" # go.sum checks every module downloaded
      GOMODCACHE = "/out/mod"
      PIN_GO_MOD = local.modules_pin.go_mod
      PIN_GO_SUM = local.modules_pin.go_sum
    }
    run = ["sh", "-c", <<-EOT
      set -e
      if ! printf '%s  go.mod\n%s  go.sum\n' "$PIN_GO_MOD" "$PIN_GO_SUM" | sha256sum -c -s; then
        echo "go.mod or go.sum is not the one output_digest was made from: run make example-self-pin" >&2
        exit 1
      fi
      go mod download
      rm -rf /out/mod/cache/download/sumdb
      find /out/mod -name '*.lock' -type f -exec rm -f {} +
    EOT
    ]
    outputs = ["/out/mod"]
    limits {
      time   = "15m"
      egress = "512MiB"
    }
  }

  # Offline: network "none", the default. Reproducible by construction: -trimpath, no VCS
  # stamp, fixed ldflags, no cgo; `foundry apply -rebuild step.build` checks it. GOCACHE is a
  # cache volume, which is keyed by the step's image: the sources are layers of seed.src, so
  # an edit makes another image and an empty cache, and every package compiles again. It
  # serves only what runs on the same image: this build and check.unit, and a step run again
  # on unchanged sources (-replace); -rebuild empties it.
  step "build" {
    image   = seed.src
    workdir = "/src"
    mounts  = { "/mod" = step.modules.output["/out/mod"] }
    caches  = { "/cache/go-build" = "go-build" }
    env     = { GOMODCACHE = "/mod", GOPROXY = "off", GOFLAGS = "-mod=readonly", GOCACHE = "/cache/go-build" }
    run     = ["go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-X main.version=self", "-o", "/out/foundry", "./cmd/foundry"]
    outputs = ["/out/foundry"]
    limits {
      time   = "60m"
      memory = "2GiB"
    }
  }

  check "unit" {
    image   = seed.src
    workdir = "/src"
    mounts  = { "/mod" = step.modules.output["/out/mod"] }
    caches  = { "/cache/go-build" = "go-build" }
    env     = { GOMODCACHE = "/mod", GOPROXY = "off", GOFLAGS = "-mod=readonly", GOCACHE = "/cache/go-build" }
    run     = ["go", "test", "-p", "1", "-count=1", "./digest", "./engine/shrink", "./engine/generate", "./store"]
    limits {
      time   = "30m"
      memory = "2GiB"
    }
  }

  check "smoke" {
    image = seed.go
    mounts = {
      "/opt/foundry"   = step.build.output["/out/foundry"]
      "/in/p/main.hcl" = file("smoke/main.hcl")
    }
    run = ["sh", "-c", "set -e; /opt/foundry version | grep -qx 'foundry self'; cp -r /in/p /tmp/p; /opt/foundry validate /tmp/p"]
  }
}
