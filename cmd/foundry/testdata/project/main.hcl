project "golden" {
  brief = file("BRIEF.md")
}

variable "tool" {
  type        = string
  description = "absolute path of the host file packed into the seed"
}

seed "base" {
  layer {
    files    = { "/bin/tool" = host_file(var.tool) }
    symlinks = { "/bin/sh" = "tool" }
  }
  env = { PATH = "/bin" }
}

step "fetch" {
  image   = seed.base
  mounts  = { "/src" = dir("src") }
  run     = ["sh", "-c", "cp /src/input.txt /out/input.txt"]
  outputs = ["/out/input.txt"]
}

step "count" {
  image   = seed.base
  mounts  = { "/in/input.txt" = step.fetch.output["/out/input.txt"] }
  run     = ["sh", "-c", "wc -l < /in/input.txt > /out/count"]
  outputs = ["/out/count"]
  limits {
    memory = "64MiB"
    time   = "30s"
  }
}
