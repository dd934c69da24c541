# A fan-out of sleeping steps on a busybox seed, for the Temporal engine's tests and bench:
# one step makes an input, var.n steps each read it and sleep var.sleep seconds, and one step
# joins the first two. var.fail makes the join exit 3.
project "fanout" {}

variable "n" {
  type    = number
  default = 4
}

variable "sleep" {
  type    = string
  default = "0"
}

variable "fail" {
  type    = bool
  default = false
}

seed "busybox" {
  layer {
    files    = { "/bin/busybox" = host_file("/bin/busybox") }
    symlinks = { for a in ["sh", "cat", "echo", "sleep", "wc", "tr"] : "/bin/${a}" => "busybox" }
  }
  env = { PATH = "/bin" }
}

step "seed" {
  image   = seed.busybox
  mounts  = { "/in/words" = dir("words") }
  run     = ["sh", "-c", "cat /in/words/* | tr a-z A-Z > /out/upper.txt; mkdir /out/tree; echo leaf > /out/tree/leaf.txt"]
  outputs = ["/out/upper.txt", "/out/tree"]
}

step "work" {
  count   = var.n
  image   = seed.busybox
  mounts  = { "/in/upper.txt" = step.seed.output["/out/upper.txt"], "/in/tree" = step.seed.output["/out/tree"] }
  run     = ["sh", "-c", "sleep ${var.sleep}; echo ${count.index} $(wc -c < /in/upper.txt) $(cat /in/tree/leaf.txt) > /out/n.txt"]
  outputs = ["/out/n.txt"]
}

step "join" {
  image   = seed.busybox
  mounts  = { "/in/a" = step.work[0].output["/out/n.txt"], "/in/b" = step.work[1].output["/out/n.txt"] }
  run     = ["sh", "-c", var.fail ? "echo failing on purpose >&2; exit 3" : "cat /in/a /in/b > /out/joined.txt"]
  outputs = ["/out/joined.txt"]
}
