# Builds the Go program in this module's src for one platform (GOOS/GOARCH), on the host,
# with the host's Go toolchain hashed into a seed.
variable "platform" { type = string }

seed "go" {
  layer {
    dir = host_dir("/usr/local/go")
    at  = "/usr/local/go"
  }
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { for t in ["sh", "cat", "cmp", "od"] : "/bin/${t}" => "busybox" }
  }
  env = { PATH = "/usr/local/go/bin:/bin", HOME = "/tmp", GOCACHE = "/tmp/c", CGO_ENABLED = "0" }
}

step "build" {
  image   = seed.go
  mounts  = { "/src" = dir("src") }
  env     = { GOOS = split("/", var.platform)[0], GOARCH = split("/", var.platform)[1] }
  run     = ["go", "build", "-C", "/src", "-trimpath", "-o", "/out/sum", "."]
  outputs = ["/out/sum"]
}

output "bin" { value = step.build.output["/out/sum"] }
output "toolchain" { value = seed.go }
