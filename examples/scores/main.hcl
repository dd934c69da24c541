# The scores service: upload a list of integer scores, see it in increasing order, and get it
# back after a restart. The sorting is the int-sort capability, admitted on sealed cases no
# builder sees; the product is accepted through its HTTP interface, across a restart, and
# only then delivered to a directory the operator's grants file allows.
project "scores" {
  brief    = file("README.md")
  registry = "oci-layout:.foundry/registry"
}

variable "release_dir" {
  type        = string
  default     = "/tmp/foundry-scores-release"
  description = "where product.scores is delivered (an absolute path the grants file allows)"
}

capability "int-sort" {
  summary     = "Sort a JSON array of 64-bit integers ascending, keeping duplicates"
  equivalence = "json"
  interface "cli" {
    entrypoint = ["/bin/int-sort"]
    input      = jsonschema("int-sort/schemas/int-list.json")
    output     = jsonschema("int-sort/schemas/int-list.json")
    errors     = { invalid_input = 2 }
  }
  suite "dev" { cases = "int-sort/cases/dev/*.json" }
  suite "repair" { cases = "int-sort/cases/repair/*.json" }
  suite "sealed" { cases = "int-sort/sealed/*.json" } # evaluator only: no step may read it
}

# The host's Go toolchain, hashed into a seed; the build runs offline in the sandbox.
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

# A static busybox: the shell and tools the service's CGI program uses, and its httpd.
seed "bb" {
  layer {
    files = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = {
      for applet in ["sh", "cat", "chmod", "cp", "head", "ln", "ls", "mkdir", "printf", "rm", "sed", "wc", "httpd"] :
      "/bin/${applet}" => "busybox"
    }
  }
  env = { PATH = "/bin", LC_ALL = "C" }
}

recipe "int-sort-go" {
  provides = capability.int-sort
  step "build" {
    image   = seed.go
    mounts  = { "/src" = dir("int-sort/src/good") }
    workdir = "/src"
    run     = ["go", "build", "-trimpath", "-o", "/out/int-sort", "."]
    outputs = ["/out/int-sort"]
    limits {
      memory = "2GiB"
      time   = "10m"
    }
  }
  package {
    base  = seed.bb
    files = { "/bin/int-sort" = step.build.output["/out/int-sort"] }
  }
}

product "scores" {
  summary  = "upload integer scores, see them sorted, get them back after a restart"
  requires = [capability.int-sort]

  # Lays out the service: its start script, its CGI program, busybox (for httpd) and the
  # admitted int-sort, which the CGI program calls for the sorted view.
  step "server" {
    image   = seed.bb
    mounts  = { "/src" = dir("src"), "/cap" = capability.int-sort }
    run     = ["sh", "/src/build.sh"]
    outputs = ["/out/srv"]
  }

  accept "service" {
    image       = seed.bb
    files       = { "/srv" = step.server.output["/out/srv"] }
    # Paths are relative to the files' root, as the release's start command's: in the
    # sandbox the service runs from /, so ../data is the volume at /data.
    entrypoint  = ["/srv/start", "../data"]
    port        = 8080
    ready       = "/healthz"
    data        = "/data"
    input       = jsonschema("schemas/scores.json")
    errors      = { invalid_input = 400, not_found = 404 }
    equivalence = "json"
    cases       = "acceptance/*.json"
  }

  # The release is what was accepted: the same files (the same tree), started by the same
  # command (start is the accepted entrypoint). Run from DEST/current/files, ../data is the
  # release's data/, which the release channel carries to the next release and back on a
  # rollback.
  deliver {
    to    = "dir:${var.release_dir}"
    files = { "/srv" = step.server.output["/out/srv"] }
  }
}
