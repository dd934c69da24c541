# The project the foundry binary examples/self builds validates, in its smoke check.
project "smoke" {}

seed "busybox" {
  layer {
    files    = { "/bin/busybox" = "not read: validate builds nothing" }
    symlinks = { "/bin/sh" = "busybox" }
  }
  env = { PATH = "/bin" }
}

step "greet" {
  image   = seed.busybox
  run     = ["sh", "-c", "echo hello > /out/greeting.txt"]
  outputs = ["/out/greeting.txt"]
}
