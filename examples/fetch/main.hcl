# gojq, a real public Go program, built from the Go module proxy: a fixed-output step fetches
# its source and every module it needs through Foundry's egress broker, pinned by the digest
# of what it makes; the build then runs offline, and a smoke test runs what it built.
project "fetch" {
  brief = file("README.md")
}

# The module proxy is the operator's, read from their environment (go env GOPROXY) by
# operator/from-environment.sh; nothing in the project names it. The operator's grants file
# allows goproxy_host, its HOST:PORT.
variable "goproxy" {
  type        = string
  description = "the module proxy's URL, as go env GOPROXY names it"
}
variable "goproxy_host" {
  type        = string
  description = "HOST:PORT of goproxy, which a grant \"network\" of the operator allows"
}

# The host's Go toolchain, hashed into a seed, and the machine's CA certificates (the proxy
# is reached over TLS, through the broker's CONNECT tunnel).
seed "go" {
  layer {
    files = {
      "/bin/busybox"                       = host_file("/bin/busybox")
      "/etc/ssl/certs/ca-certificates.crt" = host_file("/etc/ssl/certs/ca-certificates.crt")
    }
    symlinks = { "/bin/sh" = "busybox", "/bin/cp" = "busybox", "/bin/chmod" = "busybox" }
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
    CGO_ENABLED = "0"
  }
}

# The network, only because its result is pinned in advance: gojq's module and `go mod
# vendor` of it, so that /out/src builds offline. go.sum checks each module; output_digest
# pins the whole tree. A Go toolchain that vendors differently makes another tree: apply then
# fails, names the digest it got, and stores nothing.
step "fetch" {
  description   = "gojq v0.12.17 and its modules, from the module proxy through the broker"
  image         = seed.go
  network       = "egress"
  egress        = [var.goproxy_host]
  output_digest = "sha256:a2d2a37b99717892ac3b45416dde134c1f0da7561c8e28f427bc5a68fdb382bf"
  env = {
    GOPROXY    = var.goproxy
    GOSUMDB    = "off" # go.sum, in the module, checks every module vendored
    GOFLAGS    = "-modcacherw"
    GOMODCACHE = "/tmp/mod"
  }
  run = ["sh", "-c", <<-EOT
    set -e
    go mod download -json github.com/itchyny/gojq@v0.12.17 >/dev/null
    cp -r /tmp/mod/github.com/itchyny/gojq@v0.12.17 /out/src
    cd /out/src
    go mod vendor
  EOT
  ]
  outputs = ["/out/src"]
  limits {
    time   = "10m"
    egress = "256MiB"
  }
}

# Offline: network "none", the default. Only what step.fetch made, by its pinned digest.
step "build" {
  image   = seed.go
  mounts  = { "/src" = step.fetch.output["/out/src"] }
  workdir = "/src"
  run     = ["go", "build", "-mod=vendor", "-trimpath", "-o", "/out/gojq", "./cmd/gojq"]
  outputs = ["/out/gojq"]
  limits { time = "30m" }
}

step "smoke" {
  image = seed.go
  mounts = {
    "/opt/gojq"  = step.build.output["/out/gojq"]
    "/in/tools.json" = jsonencode([{ name = "gojq", lang = "go" }, { name = "jq", lang = "c" }])
  }
  run     = ["sh", "-c", "/opt/gojq -c '[.[] | select(.lang == \"go\") | .name]' /in/tools.json > /out/result.json"]
  outputs = ["/out/result.json"]
}
